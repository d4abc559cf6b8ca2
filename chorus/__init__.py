"""The process: the `chorus` command line and `chorus serve`, where the runtime meets the lanes.

The one package that imports both `bot` and `channels` (lanes import the runtime, never
the other way): importing `channels` registers the lanes, whose settings sections then
come with the settings the command reads, and `chorus serve` and `chorus chat` build and
run them. Nothing imports this package; it holds no turn, storage or platform logic.
"""
