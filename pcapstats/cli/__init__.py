"""The `pcapstats` command line: :data:`app` and one module a command group.

Importing a command module registers its commands on the app; :func:`main` is the console
entry point (one error line and an exit code, never a traceback).  It imports the module of
the command asked for alone, or every one for the list of them (``commands.py``).
"""

from .app import app, main

__all__ = ["app", "main"]
