"""`python -m bot.cli`: the `chorus` command line."""

from bot.cli import main

raise SystemExit(main())
