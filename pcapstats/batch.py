"""Many captures through one analysis, and the one input policy every analysis shares.

    for outcome in ps.each(ps.throughput, ["a.pcap", "b.pcap"]):
        outcome.result or outcome.error     # one capture's result, or why it failed
    ps.concat(outcome.result for outcome in ...)   # one result with a `capture` column
    ps.throughput(["a.pcap", "b.pcap"])     # the same in one call (raises on the first failure)

Every analysis is wrapped by :func:`analysis`: it takes a :class:`~pcapstats.Capture` or a path
(read once by :func:`pcapstats.reader.as_capture`), or a list of either (then it runs on each
and returns :func:`~pcapstats.results.concat` of the results); its options are keyword-only.
The command line runs its captures through :func:`each` too, so a notebook and a command give
the same numbers with the same errors and warnings.
"""

from __future__ import annotations

import functools
import os
import warnings
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import numpy as np

from .capture import FILE_FACTS, Capture, Needs
from .clock import restating
from .errors import Note, NothingToReport, PcapstatsError, PcapstatsWarning
from .ingest import Kept, read_kept, reporting_progress
from .ingest.groups import ByStream, table_budget
from .reader import as_capture
from .results import Result, concat, stack
from .streams import SummaryKeeper, choose_stream, stream_summary

__all__ = ["analysis", "each", "each_stream", "concat", "Outcome"]


def analysis(*, reads: bool = True, needs: Needs | None = None,
             by_stream: Callable[[list], Result] | None = None, one_stream: bool = False):
    """Decorator giving an analysis function the input policy of the module docstring.

    The function itself takes one ``Capture`` (with ``reads=False``: a Capture or a path, for
    an analysis that can stream a file instead of reading it whole) and keyword options.
    With ``needs``, a path is read for the analysis alone (those rows and columns: a Capture
    given is used whole).  A per-stream TCP analysis, which keeps no state across streams,
    says so with ``one_stream`` (it analyses the ``stream`` option's stream, by default the
    one with the most payload) or ``by_stream`` (with no ``stream`` option it analyses every
    stream, and ``by_stream(results)`` joins its results on batches of streams into one):
    a path is then read grouped by stream, spilled to disk past ``ingest.groups.table_budget``
    (see :func:`_grouped`)."""
    def wrap(function: Callable[..., Result]):
        @functools.wraps(function)
        def run(capture, /, **options) -> Result:
            if isinstance(capture, (list, tuple)):
                return concat([run(one, **options) for one in capture])
            with restating() as clock:     # its clock warning names what the breaks touched
                if (by_stream or one_stream) and isinstance(capture, (str, os.PathLike)):
                    result = _grouped(function, capture, needs, by_stream, options)
                else:
                    if reads or not isinstance(capture, (str, os.PathLike)):
                        capture = as_capture(capture, needs)
                    result = function(capture, **options)
                clock.says = result.clock_touched
            return result
        run.analysis = function.__name__
        return run
    return wrap


def _grouped(function, path, needs: Needs, join, options) -> Result:
    """A per-stream analysis of a path read for ``needs`` in one pass.  When the table fitted
    the budget, the function runs on it; when it was spilled, on each batch of streams, joined
    (every stream: a batch's own TCP rows say which streams it has), or on the batch holding
    the stream asked for, which the whole file's stream summary, summed in the same pass,
    chooses (so the choice, its error and the streams' names are the whole table's), or
    (``stream="all"``) on each batch for the streams it holds.  A stream named by number keeps
    only its rows.  Time going back across windows (the summary cannot be streamed) and a
    stream that is not there (the analysis' own error) read the whole table."""
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0                                      # the reader says what is wrong with it
    stream = options.get("stream")
    summary = SummaryKeeper()
    with ByStream(needs, table_budget(size)) as keeper:
        if join is not None and stream is None:    # every stream: no choice, no summary needed
            kept = read_kept(path, [keeper])[0]
            if isinstance(kept, Capture):
                return function(kept, **options)
            joined = None             # joined as it goes: a batch's result held no longer
            for cap in kept.captures():
                part = function(cap, **options)
                del cap                # not held while the next batch loads
                joined = part if joined is None else join([joined, part])
            return joined if joined is not None else function(kept.empty(), **options)
        if isinstance(stream, (int, np.integer)) and not isinstance(stream, bool):
            return _one_named_stream(function, path, needs, int(stream), summary, options)
        if stream is None:
            return _chosen_stream(function, path, needs, options)
        kept, streams = read_kept(path, [keeper, summary])
        if streams is None:
            return function(as_capture(path), **options)
        if isinstance(kept, Capture):
            summary.put(kept, streams)
            return function(kept, **options)
        if stream == "all":
            return _every_stream(function, kept, streams, summary, options)
        probe = kept.empty()
        summary.put(probe, streams)
        try:
            chosen = choose_stream(probe, stream).stream
        except PcapstatsError:        # no such TCP stream: the analysis' own error, as it
            return function(as_capture(path), **options)    # says it on the whole table
        cap = kept.capture_of(chosen)
        summary.put(cap, streams)
        return function(cap, **options)


def _every_stream(function, kept, streams, summary, options) -> Result:
    """``stream="all"`` over a spilled table: every stream with data analysed on the batch
    that holds it (each batch loaded once, the whole file's summary in its cache), stacked as
    ``each_stream`` stacks them."""
    probe = kept.empty()
    summary.put(probe, streams)
    ids = data_streams(probe)
    results: dict = {}
    for cap in kept.captures():
        summary.put(cap, streams)
        here = set(np.unique(cap.column("tcp_stream")).tolist())
        for s in ids:
            if s in here:
                results[s] = _attempt(lambda s: function(cap, **{**options, "stream": s}), s)
        del cap                        # not held while the next batch loads
    return stacked_streams(probe.path, ids, results)


def _chosen_stream(function, path, needs: Needs, options) -> Result:
    """The stream a one-stream analysis picks by default, read alone: a first pass sums the
    whole file's stream summary, which chooses it, a second keeps only that stream's rows, so
    memory follows that stream, not the file (a table read whole or spilled holds the budget's
    worth of other streams' rows).  No stream to choose, or time going back across windows:
    the whole table, as before (the analysis' own error, or its answer)."""
    summary = SummaryKeeper()
    with warnings.catch_warnings():        # the second read says the reader's warnings
        warnings.simplefilter("ignore")
        streams, probe = read_kept(path, [summary, Kept(FILE_FACTS)])
    if streams is None:
        return function(as_capture(path), **options)
    summary.put(probe, streams)
    try:
        chosen = choose_stream(probe, None).stream
    except PcapstatsError:
        return function(as_capture(path), **options)
    return _one_named_stream(function, path, needs, chosen, summary, options, streams)


def _one_named_stream(function, path, needs: Needs, stream: int, summary, options,
                      streams: dict | None = None) -> Result:
    """A stream named by number: only its rows are kept (no spill, whatever the file's size),
    with the whole file's summary (``streams``, when a first pass summed it); a stream that
    is not there gets the analysis' own error from the whole table."""
    def rows(window):
        return needs.rows(window) & (window.column("tcp_stream") == stream)

    if streams is None:
        kept, streams = read_kept(path, [Kept(Needs(needs.names, rows)), summary])
    else:
        kept = read_kept(path, [Kept(Needs(needs.names, rows))])[0]
    if streams is None or not len(kept):
        return function(as_capture(path), **options)
    summary.put(kept, streams)
    return function(kept, **options)


def each_stream(capture, stream, analyse: Callable[[int], Result]) -> Result:
    """A per-stream analysis on ``stream``: one TCP stream (by default the one with the most
    payload), or ``"all"``: every TCP stream that carries data, one result a stream stacked
    (a stream the analysis refuses, say one without a window to estimate, is left out with a
    note)."""
    if stream != "all":
        choice = choose_stream(capture, stream)
        result = analyse(choice.stream)
        result.notes[:0] = [n for n in (choice.note(),) if n]   # say which stream was picked
        return result
    ids = data_streams(capture)
    return stacked_streams(capture.path, ids, {s: _attempt(analyse, s) for s in ids})


def data_streams(capture) -> list[int]:
    """The TCP streams with data, which ``stream="all"`` analyses (by the capture's stream
    summary: the whole file's); the one clear error when the capture has no TCP."""
    tcp = stream_summary(capture, proto="tcp")
    ids = tcp["stream"][(tcp["payload_bytes_a_to_b"] + tcp["payload_bytes_b_to_a"]) > 0]
    if len(ids) == 0:
        choose_stream(capture, None)       # the one clear error: no TCP, or none with data
    return ids.tolist()


def _attempt(analyse: Callable[[int], Result], s: int) -> Result | PcapstatsError:
    try:
        return analyse(s)
    except PcapstatsError as e:
        return e


def stacked_streams(path, ids: list[int], results: dict) -> Result:
    """``stream="all"``'s answer: each stream's result (or the error that left it out, said
    in a note) stacked in the order of ``ids``; an error when none could be analysed."""
    done = [results[s] for s in ids if not isinstance(results[s], PcapstatsError)]
    skipped = [Note("left out", about=f"stream {s}", detail=str(results[s])) for s in ids
               if isinstance(results[s], PcapstatsError)]
    if not done:
        raise NothingToReport(f"no TCP stream could be analysed in {path}",
                              hint=f"{skipped[0]}: {skipped[0].detail}" if skipped else None)
    result = stack(done)
    result.notes += skipped
    return result


@dataclass
class Outcome:
    """One capture's run through an analysis: its result, or the error that stopped it, and
    the warnings said on the way (each a sentence)."""
    source: str
    result: Result | None = None
    error: PcapstatsError | None = None
    warnings: list[str] = field(default_factory=list)


def each(function: Callable[..., Result], sources: Iterable, /, *,
         progress: Callable[[float], None] | None = None, **options) -> Iterator[Outcome]:
    """Run ``function`` on each capture in turn; a capture that fails gives an Outcome with
    its error and the others still run.  ``progress(fraction)`` follows the reading over all
    captures, weighted by file size."""
    sources = list(sources)
    sizes = [_size(s) for s in sources]
    total, done = max(sum(sizes), 1), 0
    for source, size in zip(sources, sizes):
        def moved(fraction, before=done, size=size):
            progress((before + size * fraction) / total)
        outcome = Outcome(_name(source))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PcapstatsWarning)
            try:
                with reporting_progress(moved if progress else None):
                    outcome.result = function(source, **options)
            except PcapstatsError as e:
                outcome.error = e
        outcome.warnings = [str(w.message) for w in caught
                            if issubclass(w.category, PcapstatsWarning)]
        done += size
        if progress:
            progress(done / total)
        yield outcome


def _name(source) -> str:
    return str(getattr(source, "path", source))


def _size(source) -> int:
    try:
        return os.stat(_name(source)).st_size
    except OSError:
        return 0
