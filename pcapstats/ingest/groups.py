"""A per-stream analysis' table of a path, grouped by TCP stream and spilled to disk when it
would not fit in memory, so a capture larger than memory is analysed a batch of streams at a
time in bounded memory.

``ByStream`` is a ``read_kept`` keeper.  It keeps the rows and columns a ``Needs`` names as
``Kept`` does while they fit ``budget`` bytes; past that it moves them to a scratch directory,
one file for each of ``BUCKETS`` groups of streams (``tcp_stream % BUCKETS``), and writes every
later window's rows there, but for the group largest then (the *resident* group, loaded whole
anyway), whose rows stay in memory.  ``done`` gives the whole partial Capture when nothing was
spilled, else a ``Spilled``: its ``captures()`` give the resident group first, then load the
others a batch at a time (as many groups as fit the budget together, their rows merged back
into frame order), so memory holds one batch's table, never the file's.  Every batch is a
partial Capture with the whole file's facts (``WholeFile``), so an analysis that keeps no state
across streams answers on each as it does on the whole table; ``pcapstats.batch`` joins the
answers.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import tempfile

import numpy as np

from .keepers import Kept, partial_capture
from .contract import table_array
from ..capture import Capture, WholeFile

BUCKETS = 16
SPREAD = 0.75        # spill only while the largest group holds less than this share of the rows
#: kept rows are spilled past this many bytes when the file is small (see table_budget)
MIN_BUDGET = 64 << 20
MAX_BUDGET = 1 << 30
#: bytes; overrides table_budget (tests and a machine with little memory set it)
BUDGET_ENV = "PCAPSTATS_TABLE_BUDGET"


def table_budget(file_size: int) -> int:
    """How many bytes of kept packet table a per-stream analysis holds in memory at once: 40 %
    of the file's size, at least 64 MiB and at most 1 GiB, and at most a quarter of the memory
    this process can still have (the system's available memory, or its memory cgroup's room):
    the analysis of a batch adds about as much again as its table, and the file's mapped pages
    are charged to a cgroup too.  ``PCAPSTATS_TABLE_BUDGET`` (bytes) overrides it."""
    said = os.environ.get(BUDGET_ENV)
    if said:
        return max(int(said), 1)
    budget = min(max(0.4 * file_size, MIN_BUDGET), MAX_BUDGET)
    room = memory_room()
    if room is not None:
        budget = min(budget, room // 4)
    return int(max(budget, 1 << 20))


def memory_room() -> int | None:
    """Bytes this process can still be given: the least of the system's MemAvailable and its
    memory cgroup's limit less its usage (cgroup v2 or v1); None when none can be read."""
    rooms = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    rooms.append(int(line.split()[1]) * 1024)
    except OSError:
        pass
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":                                   # cgroup v2
            places = [("/sys/fs/cgroup", "memory.max", "memory.current"),
                      ("/sys/fs/cgroup/unified", "memory.max", "memory.current")]
        elif "memory" in controllers.split(","):                # cgroup v1
            places = [("/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes")]
        else:
            continue
        for root, limit_name, usage_name in places:
            folder = os.path.join(root, path.lstrip("/"))
            try:
                with open(os.path.join(folder, limit_name)) as f:
                    limit = f.read().strip()
                with open(os.path.join(folder, usage_name)) as f:
                    usage = int(f.read())
            except (OSError, ValueError):
                continue
            if limit.isdigit() and int(limit) < 1 << 60:        # "max" / a huge v1 number: none
                rooms.append(max(int(limit) - usage, 0))
            break
    return min(rooms) if rooms else None


class ByStream:
    """Keeper of ``read_kept``: ``needs``' rows, in memory while under ``budget`` bytes,
    spilled by stream group past it.  A context manager: leaving it removes the scratch
    directory, however the read or the analysis ended."""

    def __init__(self, needs, budget: int, scratch: str | None = None):
        self.kept, self.budget, self.scratch = Kept(needs), budget, scratch
        self.spill: _Buckets | None = None
        self.rows_in = np.zeros(BUCKETS, np.int64)      # kept rows in each group so far

    @property
    def seen(self) -> bool:
        return self.kept.seen

    def add(self, window: Capture) -> None:
        if self.spill is not None:
            self.spill.add_window(window)
            return
        rows = np.asarray(self.kept.needs.rows(window), bool)
        self.rows_in += np.bincount(window.column("tcp_stream")[rows] % BUCKETS,
                                    minlength=BUCKETS)
        self.kept.add(window, rows)
        k = self.kept
        if (k.n * _row_bytes(k.store[n].dtype for n in (*k.columns, *k.layers)) > self.budget
                and self._worth_spilling()):
            self.spill = _Buckets(self.kept, self.scratch, int(np.argmax(self.rows_in)))

    def _worth_spilling(self) -> bool:
        """Past the budget, spilling helps only where the rows are spread over groups: the
        largest group is loaded whole anyway, so a capture of one long flow (and a small
        control connection, say) stays in memory rather than being written out and read
        back whole (until other streams grow to a quarter of the rows)."""
        return self.rows_in.max() < SPREAD * self.rows_in.sum()

    def done(self, total: int):
        if self.spill is None:
            return self.kept.done(total)
        return Spilled(self.spill, self.kept, total, self.budget)

    def __enter__(self) -> ByStream:
        return self

    def __exit__(self, *exc) -> None:
        if self.spill is not None:
            self.spill.remove()


class _Buckets:
    """The scratch files: one a group of streams, written block after block (a block: each
    kept column's values for the group's rows of one window, in column order), so a group is
    read back in frame order by one sequential pass.  The ``resident`` group is not written:
    its rows stay in ``kept``'s store (the largest group is loaded whole anyway, so writing it
    out and reading it back bought no memory; on a capture of two long flows that was half
    the scratch files' bytes)."""

    def __init__(self, kept: Kept, scratch: str | None, resident: int):
        self.names = [*kept.columns, *kept.layers]
        self.dtypes = {n: kept.store[n].dtype for n in self.names}
        self.layers = set(kept.layers)
        self.needs = kept.needs
        remove_dead_spills(scratch)
        self.dir = tempfile.mkdtemp(prefix=f"{SPILL_PREFIX}{os.getpid()}-", dir=scratch)
        self.files = [open(os.path.join(self.dir, f"{b}.bin"), "wb") for b in range(BUCKETS)]
        self.blocks: list[list[int]] = [[] for _ in range(BUCKETS)]
        self.kept, self.resident = kept, resident
        # what was kept so far goes first; the resident group's rows move to the store's front
        n = kept.n
        stream = kept.store[kept.same["tcp_stream"]][:n]
        mine = stream % BUCKETS == resident
        others = np.flatnonzero(~mine)
        self._write({name: kept.store[name][:n] for name in self.names}, others, stream[others])
        del stream, others
        mine = np.flatnonzero(mine)
        for name in self.names:
            store = kept.store[name]
            if store[:n].any():                 # a column of zeros stays untouched
                store[:len(mine)] = store[mine]
                store[len(mine):n] = 0          # later windows write only their non-zeros
        kept.n = len(mine)

    def add_window(self, window: Capture) -> None:
        rows = np.asarray(self.needs.rows(window), bool)
        mine = rows & (window.column("tcp_stream") % BUCKETS == self.resident)
        self.kept.add(window, mine)             # the resident group's rows; the window counted
        at = np.flatnonzero(rows & ~mine)
        if not len(at):
            return
        values = {n: (window.layer(n) if n in self.layers else window.column(n))
                  for n in self.names}
        self._write(values, at, window.column("tcp_stream")[at])

    def _write(self, values: dict, at: np.ndarray, stream: np.ndarray) -> None:
        """Rows ``at`` of ``values`` to their streams' groups, in row order within each."""
        bucket = (stream % BUCKETS).astype(np.uint8)
        order = np.argsort(bucket, kind="stable")
        bounds = np.searchsorted(bucket[order], np.arange(BUCKETS + 1))
        rows = at[order]
        written = [[] for _ in range(BUCKETS)]     # the names each bucket's block holds
        for name in self.names:
            column = values[name]
            if not column.any():
                continue                            # zeros (no SACK, say): written as nothing
            taken = np.asarray(column[rows], self.dtypes[name])
            for b in range(BUCKETS):
                lo, hi = bounds[b], bounds[b + 1]
                if hi > lo and taken[lo:hi].any():
                    self.files[b].write(memoryview(np.ascontiguousarray(taken[lo:hi])))
                    written[b].append(name)
        for b in range(BUCKETS):
            if bounds[b + 1] > bounds[b]:
                self.blocks[b].append((int(bounds[b + 1] - bounds[b]), frozenset(written[b])))

    def close_files(self) -> None:
        for f in self.files:
            if not f.closed:
                f.close()

    def rows(self, b: int) -> int:
        """Rows of group ``b`` (the resident group's in memory, the others' in their files)."""
        return self.kept.n if b == self.resident else sum(k for k, _ in self.blocks[b])

    def load(self, b: int) -> dict[str, np.ndarray]:
        """Group ``b``'s columns and layers, read back block by block (a column's zeros are
        never written nor read: its pages stay untouched)."""
        n = self.rows(b)
        out = {name: table_array(n, self.dtypes[name]) for name in self.names}
        at = 0
        with open(os.path.join(self.dir, f"{b}.bin"), "rb", buffering=0) as f:
            for k, written in self.blocks[b]:
                for name in self.names:
                    if name not in written:
                        continue
                    view = memoryview(out[name][at:at + k]).cast("B")
                    got = f.readinto(view)
                    while got < len(view):          # a short read: go on where it stopped
                        more = f.readinto(view[got:])
                        if not more:
                            raise OSError(f"spill file {f.name} ended early")
                        got += more
                at += k
        return out

    def remove(self) -> None:
        self.close_files()
        shutil.rmtree(self.dir, ignore_errors=True)


SPILL_PREFIX = "pcapstats-spill-"


def remove_dead_spills(scratch: str | None = None) -> list[str]:
    """Remove the scratch directories of pcapstats processes that are gone (killed with
    SIGKILL, or by the kernel out of memory, no exit path ran): ``pcapstats-spill-PID-*``
    whose PID runs no process; a live one's, and anything not named so, are left alone."""
    folder = scratch or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        pid = name[len(SPILL_PREFIX):].split("-", 1)[0]
        if not name.startswith(SPILL_PREFIX) or not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
            continue                                    # its process is alive
        except ProcessLookupError:
            pass
        except PermissionError:
            continue                                    # alive, another user's
        shutil.rmtree(os.path.join(folder, name), ignore_errors=True)
        removed.append(name)
    return removed


class Spilled:
    """A partial table spilled by stream group: ``captures()`` yields it a batch of groups at
    a time, each a partial Capture in frame order, the resident group (in memory) first;
    ``warnings`` are the reader's.  Read once: the resident group's table is let go once
    given (or once another batch is loaded), as each loaded batch is."""

    def __init__(self, buckets: _Buckets, kept: Kept, total: int, budget: int):
        buckets.close_files()
        self.buckets, self.budget = buckets, budget
        self.resident, self.store = buckets.resident, kept.store
        kept.store = {}                         # held here alone: let go once given
        self.warnings: list[str] = []
        self.whole = WholeFile(total, kept.start_ns, dict(kept.counts), kept.latest_ns,
                               kept.last.clock)
        self.first, self.last, self.same = kept.first, kept.last, kept.same
        self.layers = list(kept.layers)

    def batches(self) -> list[list[int]]:
        """Groups in order, small ones together as many as fit the budget; a group past a
        quarter of it is a batch of its own (a batch of several is merged back into frame
        order, a gather of every column: ~0.1 s to add a 29-row group to an 896k-row one)."""
        row_bytes = _row_bytes(self.buckets.dtypes.values())
        out, packing, size = [[self.resident]], None, 0
        for b in range(BUCKETS):
            group = self.buckets.rows(b) * row_bytes
            if not group or b == self.resident:
                continue
            if group > self.budget // 4:
                out.append([b])
            elif packing is not None and size + group <= self.budget:
                packing.append(b)
                size += group
            else:
                packing, size = [b], group
                out.append(packing)
        return out

    def captures(self):
        for batch in self.batches():
            yield self._capture(batch)

    def capture_of(self, stream: int) -> Capture:
        """The batch that holds TCP stream ``stream`` (empty when none does)."""
        bucket = stream % BUCKETS
        for batch in self.batches():
            if bucket in batch:
                return self._capture(batch)
        return self.empty()

    def _capture(self, batch: list[int]) -> Capture:
        if batch == [self.resident]:
            if self.store is None:
                raise RuntimeError("a spilled table's resident group is given once")
            _give_back_freed_memory()  # the read's: its windows, the spill's gathers
            n, store, self.store = self.buckets.rows(self.resident), self.store, None
            return self._partial({name: store[name][:n] for name in self.buckets.names})
        self.store = None              # the resident group's table, if not yet given: let go
        _give_back_freed_memory()      # the last batch's analysis, the reader's windows
        parts = [self.buckets.load(b) for b in batch]
        if len(parts) == 1:
            values = parts[0]
        else:                                       # merged back into frame order
            order = np.argsort(np.concatenate([p["frame_number"] for p in parts]), kind="stable")
            values = {}
            for name in self.buckets.names:
                values[name] = np.concatenate([p.pop(name) for p in parts])[order]
        return self._partial(values)

    def _partial(self, values: dict) -> Capture:
        cap = partial_capture(self.first, self.last,
                              {name: values[held] for name, held in self.same.items()},
                              {name: values[name] for name in self.layers}, self.whole)
        cap.warnings.extend(self.warnings)
        return cap

    def empty(self) -> Capture:
        """No rows, the whole file's facts: what an analysis says of a file without its rows."""
        return partial_capture(
            self.first, self.last,
            {name: np.zeros(0, self.buckets.dtypes[held]) for name, held in self.same.items()},
            {name: np.zeros(0, bool) for name in self.layers}, self.whole)


def _row_bytes(dtypes) -> int:
    """Bytes a kept row takes: its columns' and layers' item sizes."""
    return sum(np.dtype(d).itemsize for d in dtypes) or 1


def _give_back_freed_memory() -> None:
    """Return the C heap's freed pages to the system (glibc's malloc_trim; elsewhere nothing).
    Freed arrays under glibc's mmap threshold, which grows to 32 MB as large arrays are freed,
    stay in the heap: without this a batch's analysis is still resident when the next batch
    loads (flavour on a 2-stream, 254 MB capture: 412 MB peak, 366 MB with it).  The C
    library is looked up here, on the first spill, not at import: every command imports this
    module."""
    try:
        trim = ctypes.CDLL(None).malloc_trim     # the process's own symbols: libc's, no search
    except (OSError, AttributeError):
        return                                   # not glibc
    trim.argtypes = [ctypes.c_size_t]
    trim(0)
