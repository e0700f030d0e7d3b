"""Reading for one analysis: one streaming pass (``windows.packet_windows``) handing each
window to keepers, each keeping what it needs; ``Kept`` keeps the rows and columns one
``Needs`` names, so memory follows what the analysis uses, not the file.
"""

from __future__ import annotations

import numpy as np

from ..capture import Capture, WholeFile
from . import contract as K
from .fast import WINDOW_BYTES, _collected_warnings, read_fast
from .windows import packet_windows

def read_needed(path, needs, kernel: str = "auto", window_bytes: int | None = None,
                progress=None) -> Capture:
    """Read only what one analysis needs (a :class:`pcapstats.capture.Needs`): the file is
    streamed as ``packet_windows`` does, and of each window only ``needs.rows`` and
    ``needs.names`` are kept, so memory follows the rows and columns the analysis uses, not
    the file.  The Capture keeps the file's facts (first time, packets, layer counts) in
    ``whole``; its numbers are those of the whole-file table at those rows."""
    return read_kept(path, [Kept(needs)], kernel, window_bytes, progress)[0]


def read_kept(path, keepers, kernel: str = "auto", window_bytes: int | None = None,
              progress=None) -> list:
    """One streaming pass (``packet_windows``) handing every window's Capture to each keeper's
    ``add(window)``, then ``done(packets_in_file)`` of each, in order: what each keeps (a
    :class:`Kept` gives a partial Capture, an analysis' own keeper what it keeps), so several
    tables can be read for one analysis in one pass.  An empty file is one empty window.
    ``window_bytes``: WINDOW_BYTES when None (as it is when this is called)."""
    window_bytes = WINDOW_BYTES if window_bytes is None else window_bytes
    with _collected_warnings() as caught:
        def add(window: Capture) -> None:
            for keeper in keepers:
                keeper.add(window)
        total = packet_windows(path, add, kernel, window_bytes, progress)
        if not any(keeper.seen for keeper in keepers):   # an empty file
            add(read_fast(path, kernel))
        out = [keeper.done(total) for keeper in keepers]
    said = [str(w.message) for w in caught]
    for kept in out:
        if isinstance(getattr(kept, "warnings", None), list):   # a Capture, a Spilled
            kept.warnings.extend(said)
    return out


class Kept:
    """The rows ``needs`` asks for, copied from each window straight into arrays sized for the
    most rows the file could hold (rows never written cost no memory: contract.table_array),
    so the table is built without a list of windows to join (no second copy at the end).
    A keeper of ``read_kept``: ``done(packets_in_file)`` is the partial Capture."""

    def __init__(self, needs):
        self.needs, self.first, self.last, self.n, self.counts = needs, None, None, 0, {}
        self.latest_ns = None
        self.columns, self.layers, self.same = [], [], {}
        self.store = {}

    @property
    def seen(self) -> bool:
        return self.first is not None

    def add(self, window: Capture, rows: np.ndarray | None = None) -> None:
        """Keep ``window``'s rows that ``needs`` asks for (``rows``: that mask, when the caller
        has it already)."""
        rows = np.asarray(self.needs.rows(window) if rows is None else rows, bool)
        if self.first is None:                 # its arrays are reused: keep the facts, not them
            self.first, self.start_ns = window, window.first_time_ns
            self.columns, self.layers = window.kept_names(self.needs)
            # columns that are one array in the reader (TCP's and UDP's ports and stream
            # index) are kept once: a name's first holder
            holder = {}
            self.same = {n: holder.setdefault(id(window.arrays[n]), n) for n in self.columns}
            self.columns = [n for n in self.columns if self.same[n] == n]
            capacity = max(window.file_size // 16 + 1, 1 << 16)
            self.store = {n: K.table_array(capacity, window.column(n).dtype) for n in self.columns}
            self.store.update({n: K.table_array(capacity, bool) for n in self.layers})
        self.last = window
        k = int(np.count_nonzero(rows))
        every = k == len(rows)                          # the usual window of a ping flood, say
        at = None if every else np.flatnonzero(rows)
        K.room_for(self.store, self.n, k)
        for name in (*self.columns, *self.layers) if k else ():
            values = window.column(name) if name in self.columns else window.layer(name)
            if not values.any():
                continue        # the store is zeros already, its pages left untouched: free
            store = self.store[name]
            if every:
                store[self.n:self.n + k] = values
            else:
                np.take(values, at, out=store[self.n:self.n + k])  # compress(out=) is 10x slower
        self.n += k
        self.count(window)

    def count(self, window: Capture) -> None:
        """Add ``window``'s layer counts and latest time to the whole file's."""
        latest = window.latest_time_ns
        if latest is not None and (self.latest_ns is None or latest > self.latest_ns):
            self.latest_ns = latest
        for name, count in window.counted(self.layers).items():
            self.counts[name] = self.counts.get(name, 0) + count

    def done(self, total: int) -> Capture:
        n = self.n
        return partial_capture(self.first, self.last,
                               {name: self.store[held][:n] for name, held in self.same.items()},
                               {name: self.store[name][:n] for name in self.layers},
                               WholeFile(total, self.start_ns, self.counts, self.latest_ns,
                                         self.last.clock))


def partial_capture(first: Capture, last: Capture, arrays: dict, layers: dict,
                    whole: WholeFile) -> Capture:
    """A Capture of kept rows: the file's facts from its first and last windows, ``whole``'s
    for what the file has beyond them."""
    return Capture(path=first.path, format=first.format, compressed=first.compressed,
                   file_size=first.file_size, interfaces=last.interfaces, arrays=arrays,
                   layers=layers, addresses=last.addresses, engine="fast", kernel=first.kernel,
                   whole=whole)

