"""`python -m bot` is the same as the `nsstuck` console script."""

from bot.cli import main

raise SystemExit(main())
