"""`python -m pcapstats`: the same as the `pcapstats` command."""
import sys

from .cli import main

sys.exit(main())
