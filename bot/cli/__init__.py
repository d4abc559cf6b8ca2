"""What the `chorus` command runs of the runtime alone: `chorus worker`, `chorus tools`, export and import.

The command line itself is `chorus.cli`, above the runtime and the lanes; these modules
never load a lane.
"""
