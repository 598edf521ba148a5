"""`python -m hermod`: the same command line as the `hermod` console script."""
from hermod.broker.cli import main

raise SystemExit(main())
