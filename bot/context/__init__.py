"""Context maintenance: compaction, collapse and overflow recovery (`maintenance`)."""
