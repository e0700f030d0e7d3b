"""Captures through a function in worker processes, the answers in the order asked.

A study reads tens or hundreds of captures, each on one core; :func:`outcomes` spreads them
over ``jobs`` processes and still yields one :class:`~pcapstats.batch.Outcome` a capture in
the order given, so the output does not depend on ``-j``.  Each worker runs the capture
through :func:`pcapstats.batch.each`: its errors and warnings come back as they would from one
process, and one failing capture fails alone -- a bug an analysis hits on it too
(:func:`guarded`).
"""

from __future__ import annotations

import functools
import importlib
import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Iterator, Sequence

from ..batch import Outcome, each
from ..errors import PcapstatsError


def default_jobs() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                  # not Linux
        return os.cpu_count() or 1


def outcomes(function: Callable, sources: Sequence, *, jobs: int = 1,
             preload: Sequence[str] = (), **options) -> Iterator[Outcome]:
    """``function(source, **options)`` for each source, in ``jobs`` processes (one: in this
    process); the Outcomes in the order of ``sources``.  Sources that are not paths (Captures
    in memory) are run here, not copied to a worker.  ``preload``: modules every worker needs
    (pandas, matplotlib), imported once here before the workers fork rather than in each."""
    sources = list(sources)
    if jobs <= 1 or len(sources) <= 1 or not all(isinstance(s, (str, os.PathLike))
                                                 for s in sources):
        yield from each(guarded(function), sources, **options)
        return
    for module in preload:
        importlib.import_module(module)
    one = functools.partial(_one, function, options)
    context = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    pool = ProcessPoolExecutor(min(jobs, len(sources)), mp_context=context,
                               initializer=_ignore_interrupts)
    try:
        yield from pool.map(one, sources)
    finally:                      # Ctrl-C or a consumer that stops early: start nothing new
        pool.shutdown(wait=True, cancel_futures=True)


def _one(function: Callable, options: dict, source) -> Outcome:
    """One capture in a worker: its Outcome, the error kept as its one line (a picklable
    PcapstatsError of the same text)."""
    outcome = next(each(guarded(function), [source], **options))
    if outcome.error is not None:
        outcome.error = type(outcome.error)(str(outcome.error))
    return outcome


def guarded(function: Callable) -> Callable:
    """``function``, with a bug it hits on one capture made that capture's error (one line,
    as the command line says every internal error) so that the others still run;
    PCAPSTATS_DEBUG=1 lets it through with its traceback."""
    @functools.wraps(function)
    def run(source, **options):
        try:
            return function(source, **options)
        except PcapstatsError:
            raise
        except Exception as e:
            if os.environ.get("PCAPSTATS_DEBUG"):
                raise
            raise PcapstatsError(f"internal error: {type(e).__name__}: {e}",
                                 path=str(getattr(source, "path", source)),
                                 hint="please report it with the capture; PCAPSTATS_DEBUG=1 "
                                      "shows the traceback") from None
    return run


def _ignore_interrupts() -> None:
    """Ctrl-C reaches the parent, which stops the pool: a worker finishes its capture."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
