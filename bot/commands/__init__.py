"""Chat commands: the registry (`registry`) and one module per command family."""
