"""`python -m chorus`: the `chorus` command line."""

from chorus.cli import main

raise SystemExit(main())
