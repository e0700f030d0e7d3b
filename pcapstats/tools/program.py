"""What every program in tools/ does alike around its own work: one error line and an exit
status for every way it can end (its own error 2, Ctrl-C 130, a closed stdout quietly 0, a bug
of ours 3 with how to see its traceback), and SIGTERM taken as Ctrl-C so that a server killed
by the lab still writes its report."""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Callable

EXIT_OK, EXIT_ERROR, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 2, 3, 130


class SigtermInterrupts:
    """SIGTERM unwinds like Ctrl-C, when nobody else handles it and this is the main thread."""

    def __enter__(self):
        self.installed = (threading.current_thread() is threading.main_thread()
                          and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
        if self.installed:
            signal.signal(signal.SIGTERM, self._raise)

    @staticmethod
    def _raise(signum, frame):
        raise KeyboardInterrupt

    def __exit__(self, *exc):
        if self.installed:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def run(prog: str, work: Callable[[], int], errors: type[Exception]) -> int:
    """``work()``'s exit status, or the status and one line on stderr for how it ended:
    ``errors`` (the program's own: bad arguments, a peer that went away) are said as they are."""
    def say(text: str) -> None:
        print(f"{prog}: error: {text}", file=sys.stderr, flush=True)
    try:
        with SigtermInterrupts():
            return work()
    except errors as e:
        say(str(e))
        return EXIT_ERROR
    except SystemExit as e:  # -h
        return e.code if isinstance(e.code, int) else EXIT_OK
    except KeyboardInterrupt:
        say("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as e:  # a bug of ours: still one line
        if os.environ.get("PCAPSTATS_DEBUG"):
            raise
        say(f"internal error: {type(e).__name__}: {e}. Please report it; PCAPSTATS_DEBUG=1 "
            "shows the traceback")
        return EXIT_INTERNAL
