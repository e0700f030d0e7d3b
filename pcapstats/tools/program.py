"""What every program in tools/ does alike around its own work: one error line and an exit
status for every way it can end (its own error 2, Ctrl-C 130, a closed stdout quietly 0, a bug
of ours 3 with how to see its traceback), and SIGTERM taken as Ctrl-C so that a server killed
by the lab still writes its report."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from typing import Callable

from pcapstats.addresses import socket_endpoint

EXIT_OK, EXIT_ERROR, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 2, 3, 130
CONNECT_TIMEOUT_S = 10.0   # a TCP connect unanswered this long: the host is down or not there
USER_TIMEOUT_S = 60.0      # TCP_USER_TIMEOUT: data unacknowledged this long breaks a connection


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


def connect(sock: socket.socket, addr: tuple, *, prog: str, error: type[Exception]) -> None:
    """Connect a TCP client's ``sock`` to ``addr``, each way it can fail one ``error`` that says
    what to check (no server: start one with -s); once connected, unacknowledged data breaks
    the connection after USER_TIMEOUT_S instead of the kernel's ~15 minutes."""
    where = socket_endpoint(addr)
    sock.settimeout(CONNECT_TIMEOUT_S)
    try:
        sock.connect(addr)
    except ConnectionRefusedError:
        raise error(f"cannot connect to {where}: connection refused (is a {prog} server "
                    "running there? start one with -s)") from None
    except socket.timeout:
        raise error(f"cannot connect to {where}: no answer within {CONNECT_TIMEOUT_S:g} s (is "
                    "the address right and the host up?)") from None
    except OSError as e:
        raise error(f"cannot connect to {where}: {e.strerror or e}") from None
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, "TCP_USER_TIMEOUT", 18),
                    int(USER_TIMEOUT_S * 1000))
