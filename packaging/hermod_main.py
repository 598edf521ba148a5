"""Entry script of the one-file build: the `hermod` command line."""
from hermod.broker.cli import main

raise SystemExit(main())
