"""The `pcapstats` command line: :data:`app` and one module a command group.

Importing a command module registers its commands on the app; :func:`main` is the console
entry point (one error line and an exit code, never a traceback).
"""

from . import throughput  # noqa: F401  (registers its commands)
from . import simpleperf  # noqa: F401
from . import iograph  # noqa: F401  (registers its commands)
from . import lab  # noqa: F401  (registers its commands)
from . import verify  # noqa: F401  (registers its commands)
from . import tcp  # noqa: F401  (registers its commands)
from . import flavour  # noqa: F401  (registers its commands)
from . import ping  # noqa: F401  (registers its commands)
from . import udp  # noqa: F401  (registers its commands)
from . import fairness  # noqa: F401  (registers its commands)
from . import delay  # noqa: F401  (registers its commands)
from . import pingpong  # noqa: F401  (registers its commands)
from . import capture  # noqa: F401  (registers its commands)
from . import netem  # noqa: F401  (registers its commands)
from . import compare  # noqa: F401  (registers its commands)
from . import report  # noqa: F401  (registers its commands)
from . import export  # noqa: F401  (registers its commands)
from . import wifi  # noqa: F401  (registers its commands)
from . import hierarchy  # noqa: F401  (registers its commands)
from .app import app, main

__all__ = ["app", "main"]
