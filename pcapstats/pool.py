"""Captures through a function in worker processes -- this machine's, or a Dask cluster's --
the answers in the order asked.

A study reads tens or hundreds of captures, each on one core; :func:`outcomes` spreads them
over ``jobs`` processes here, or over the workers of a Dask cluster (``scheduler``: its
address, or :data:`LOCAL` for one started for the run), and still yields one
:class:`~pcapstats.batch.Outcome` a capture in the order given, so the output does not depend
on where it ran.  Both are one ``concurrent.futures`` executor (Dask's is its client's
``get_executor()``): the captures' paths are shipped, never their packets, so a Dask worker
needs pcapstats and the files at the same paths.  Each worker runs the capture through
:func:`pcapstats.batch.each`: its errors and warnings come back as they would from one
process, and one failing capture fails alone -- a bug an analysis hits on it too
(:func:`guarded`), or a worker that dies under it.

One capture, one job or Captures in memory run here, in this process: a command on one file
starts no worker (start-up), and nothing here imports the process pool or Dask before it is
needed.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import signal
from typing import Callable, Iterator, Sequence

from .batch import Outcome, each
from .errors import InternalError, PcapstatsError, UsageError

LOCAL = "local"               # scheduler=LOCAL: a Dask cluster of worker processes started here
CONNECT_TIMEOUT_S = 5         # a scheduler that does not answer (or has no worker) in this long
DASK_HINT = "pip install 'pcapstats[dask]'"


def default_jobs() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                  # not Linux
        return os.cpu_count() or 1


def outcomes(function: Callable, sources: Sequence, /, *, jobs: int | None = 1,
             scheduler: str | None = None, preload: Sequence[str] = (),
             progress: Callable[[float], None] | None = None, **options) -> Iterator[Outcome]:
    """``function(source, **options)`` for each source, in ``jobs`` processes (None: the
    cores; one: in this process) or on the Dask cluster at ``scheduler``; the Outcomes in the
    order of ``sources``.  Sources that are not paths (Captures in memory) are run here, not
    copied to a worker.  ``preload``: modules every local worker needs (pandas, matplotlib),
    imported once here before the workers fork rather than in each.  ``progress(fraction)``:
    the share of the captures' bytes done (here: as each is read; in workers: as each ends)."""
    sources = list(sources)
    jobs = default_jobs() if jobs is None else jobs
    paths = all(isinstance(s, (str, os.PathLike)) for s in sources)
    if scheduler is None and (jobs <= 1 or len(sources) <= 1 or not paths):
        yield from each(guarded(function), sources, progress=progress, **options)
        return
    if not paths:
        raise UsageError("a Dask cluster is given capture paths, not Captures in memory")
    if not sources:
        return
    one = functools.partial(_one, function, options)
    executor = (_dask(scheduler, jobs) if scheduler is not None
                else _processes(min(jobs, len(sources)), preload))
    with executor as pool:
        yield from _in_order(pool, one, sources, progress, on_dask=scheduler is not None)


def _in_order(pool, one: Callable, sources: list, progress, *, on_dask: bool
              ) -> Iterator[Outcome]:
    """Every source submitted to ``pool`` at once, the Outcomes yielded in order; progress said
    as any capture ends, not only the next in order.  A consumer that stops early (Ctrl-C)
    cancels what has not started."""
    from concurrent.futures import FIRST_COMPLETED, wait  # lazy: see _processes
    futures = [pool.submit(one, s) for s in sources]
    sizes = dict(zip(futures, (_size(s) for s in sources)))
    total, done = max(sum(sizes.values()), 1), 0
    pending = set(futures)
    try:
        for source, future in zip(sources, futures):
            while future in pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                done += sum(sizes[f] for f in finished)
                if progress:
                    progress(done / total)
            yield _result(source, future, on_dask)
    finally:
        for future in futures:
            future.cancel()


def _result(source, future, on_dask: bool) -> Outcome:
    """The worker's Outcome, or the capture's error when the worker could not give one: a
    local worker that died under it (a bug of ours: an InternalError), or a Dask worker that
    could not run it (no pcapstats there, lost)."""
    try:
        return future.result()
    except Exception as e:             # noqa: BLE001 -- whatever killed the worker, one line
        if os.environ.get("PCAPSTATS_DEBUG"):
            raise
        text = f"{type(e).__name__}: {e}".rstrip(": ")
        if on_dask:
            error = PcapstatsError(f"the Dask worker running this capture failed: {text}",
                                   path=str(source), hint="a Dask worker needs pcapstats "
                                   "installed and the capture at the same path")
        else:
            error = InternalError(f"internal error: the worker process running this capture "
                                  f"failed: {text}", path=str(source),
                                  hint="please report it with the capture")
        return Outcome(str(source), error=error)


@contextlib.contextmanager
def _processes(jobs: int, preload: Sequence[str]):
    """A pool of ``jobs`` processes forked from this one (after importing ``preload``)."""
    import multiprocessing  # lazy: a one-capture command never starts a worker
    from concurrent.futures import ProcessPoolExecutor  # lazy: as the line above
    for module in preload:
        importlib.import_module(module)
    context = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    pool = ProcessPoolExecutor(jobs, mp_context=context, initializer=_ignore_interrupts)
    try:
        yield pool
    finally:                      # Ctrl-C or a consumer that stops early: start nothing new
        pool.shutdown(wait=True, cancel_futures=True)


@contextlib.contextmanager
def _dask(scheduler: str, jobs: int):
    """The concurrent.futures executor of a Dask client: connected to ``scheduler`` (within
    CONNECT_TIMEOUT_S, and with a worker, else one error line), or to a cluster of ``jobs``
    worker processes started here (LOCAL) and closed after."""
    client, cluster = connect(scheduler, jobs)
    try:
        yield client.get_executor(pure=False)    # the same path twice is run twice, as here
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def connect(scheduler: str, jobs: int | None = None):
    """(a ``distributed.Client``, the ``LocalCluster`` started for it or None): for LOCAL a
    cluster of ``jobs`` (None: the cores) single-threaded worker processes, else the scheduler
    at that address.  Every way this can fail is one :class:`PcapstatsError` line."""
    try:
        import logging
        from distributed import Client, LocalCluster  # lazy: optional, only when asked for
        from distributed.comm.addressing import resolve_address  # lazy: as the line above
    except ImportError:
        raise UsageError("running on Dask needs dask.distributed, which is not installed",
                         hint=DASK_HINT) from None
    cluster = None
    try:
        if scheduler == LOCAL:
            cluster = LocalCluster(n_workers=jobs or default_jobs(), threads_per_worker=1,
                                   # a free port: None still takes 8787, and warns in
                                   # four lines when something else has it
                                   processes=True, dashboard_address=":0",
                                   silence_logs=logging.ERROR)
            return Client(cluster, timeout=CONNECT_TIMEOUT_S), cluster
        _probe(resolve_address(scheduler))    # fails here, before a Client is half made
        client = Client(scheduler, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except Exception as e:              # noqa: BLE001 -- refused, timed out, a bad address
        if cluster is not None:
            cluster.close()
        what = "start a local Dask cluster" if scheduler == LOCAL else \
            f"reach the Dask scheduler at {scheduler}"
        raise PcapstatsError(f"cannot {what}: {type(e).__name__}: {e}",
                             hint="check the address (tcp://HOST:8786) and that the scheduler "
                                  "runs" if scheduler != LOCAL else None) from None
    try:
        client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
    except Exception:                   # noqa: BLE001 -- a TimeoutError, said as one line
        client.close()
        raise PcapstatsError(f"the Dask scheduler at {scheduler} has no worker",
                             hint=f"none joined within {CONNECT_TIMEOUT_S} s: start "
                                  "`dask worker` processes for it") from None
    return client, None


def _probe(address: str) -> None:
    """Ask ``address`` who it is within CONNECT_TIMEOUT_S; raise unless a Dask scheduler
    answers.  A Client that fails half-made (say on a port where some other server answers)
    tries to close itself when collected, for 10 s and with a traceback: this asks first, in
    a thread of its own (a notebook's event loop may be running in this one).  Addresses
    that need a security context (tls://) are left to the Client."""
    if not address.startswith("tcp://"):
        return
    import asyncio
    from concurrent.futures import ThreadPoolExecutor  # lazy: as in _processes

    from distributed.core import rpc  # lazy: optional, only when asked for

    async def identity():
        async with rpc(address, timeout=CONNECT_TIMEOUT_S) as scheduler:
            return await asyncio.wait_for(scheduler.identity(), CONNECT_TIMEOUT_S)
    with ThreadPoolExecutor(1) as thread:
        try:
            info = thread.submit(asyncio.run, identity()).result()
        except (OSError, ValueError):
            raise
        except Exception as e:        # noqa: BLE001 -- garbage read as Dask's frames
            raise ValueError("the server there does not speak Dask's protocol "
                             f"({type(e).__name__})") from None
    kind = info.get("type") if isinstance(info, dict) else None
    if kind != "Scheduler":
        raise ValueError(f"a {kind or 'server'} answers there, not a Dask scheduler")


def _one(function: Callable, options: dict, source) -> Outcome:
    """One capture in a worker: its Outcome, the error kept as its one line (a picklable
    PcapstatsError of the same text)."""
    outcome = next(each(guarded(function), [source], **options))
    if outcome.error is not None:
        outcome.error = type(outcome.error)(str(outcome.error))
    return outcome


def guarded(function: Callable) -> Callable:
    """``function``, with a bug it hits on one capture made that capture's error (one line,
    as the command line says every internal error: an :class:`InternalError`) so that the
    others still run;
    PCAPSTATS_DEBUG=1 lets it through with its traceback."""
    @functools.wraps(function)
    def run(source, /, **options):
        try:
            return function(source, **options)
        except PcapstatsError:
            raise
        except Exception as e:
            if os.environ.get("PCAPSTATS_DEBUG"):
                raise
            raise InternalError(f"internal error: {type(e).__name__}: {e}",
                                 path=str(getattr(source, "path", source)),
                                 hint="please report it with the capture; PCAPSTATS_DEBUG=1 "
                                      "shows the traceback") from None
    return run


def _size(source) -> int:
    try:
        return os.stat(source).st_size
    except (OSError, TypeError, ValueError):
        return 0


def _ignore_interrupts() -> None:
    """Ctrl-C reaches the parent, which stops the pool: a worker finishes its capture."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
