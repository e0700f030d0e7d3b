"""``Capture``: the packet table of one file, as numpy columns with a pandas view on demand.

Analyses read the raw columns (``cap.column(name)``, whose values are meaningful only where
``cap.present(name)``: TCP and UDP ports share one array, for instance); people read
``cap.packets``, a DataFrame where a column is ``<NA>`` on packets that lack its layer.  Column
meanings live in pcapstats.schema.  Columns that are cheap to derive (float times, flag bits,
SACK edges from their compact table) are stored as functions and computed when asked, so the
table in memory stays near 100 bytes a packet.  The stream layer's facts (each packet's
``direction``, the per-stream summary) are derived from the columns by pcapstats.streams on
first use and kept in ``derived``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from . import schema, streams
from .clock import ClockCheck
from .errors import UsageError

_NULLABLE = {"uint8": "UInt8", "uint16": "UInt16", "uint32": "UInt32", "int64": "Int64",
             "int32": "Int32"}


# layers whose whole-file counts a partial table keeps: what error messages say a capture has
_COUNTED = (schema.IP, schema.TCP, schema.UDP, schema.ICMP, schema.ICMP_ECHO)


def holdings(packets: int, counts) -> str:
    """What a capture holds, said beside what an analysis looked for when it found nothing:
    ``796 packets: 795 TCP, 1 ICMP`` (``counts``: packets by layer)."""
    if not packets:
        return "no packets"
    has = [f"{counts[layer]} {layer.upper()}" for layer in (schema.TCP, schema.UDP, schema.ICMP)
           if counts.get(layer)]
    return (f"{packets} packet{'s' * (packets != 1)}: "
            + (", ".join(has) if has else "none TCP, UDP or ICMP"))


@dataclass(frozen=True)
class Needs:
    """What an analysis reads of a capture, so that a path can be read for it alone: the
    packet-table columns and layers it uses (``names``), and ``rows(window)``, a bool mask of
    the rows it needs in a window's Capture.  The table then holds those rows only, in the
    memory they take rather than the file's."""
    names: tuple[str, ...]
    rows: Callable[[Capture], np.ndarray]

    def __post_init__(self):
        # a column's layer comes with it: present(name) reads it
        implied = [schema.BY_NAME[n].layer for n in self.names if n in schema.BY_NAME]
        extra = [n for n in implied if n and n != schema.FRAME and n not in self.names]
        object.__setattr__(self, "names", tuple(dict.fromkeys((*self.names, *extra))))


def _no_rows(cap: Capture) -> np.ndarray:
    return np.zeros(len(cap), bool)


#: no rows, no columns: a Kept of it is the file's facts alone (first time, packets, layer
#: counts), what a streamed analysis puts the whole file's stream summary on to choose and
#: name streams (streams.SummaryKeeper.put)
FILE_FACTS = Needs((), _no_rows)


class AtRows:
    """A derived column computed when asked, ``f(rows)`` giving it at ``rows`` (a slice, a
    mask or indices) alone: a reader of a few rows (``Capture.column_at``) need not compute it
    for every packet."""
    __slots__ = ("f",)

    def __init__(self, f: Callable[[object], np.ndarray]):
        self.f = f

    def __call__(self) -> np.ndarray:
        return self.f(slice(None))

    def at(self, rows) -> np.ndarray:
        return self.f(rows)


@dataclass(frozen=True)
class WholeFile:
    """Facts of the whole file kept by a Capture that holds only some of its rows."""
    packets: int
    first_time_ns: int | None
    layer_counts: dict
    latest_time_ns: int | None = None    # the file's largest timestamp (clocks step back)
    clock: ClockCheck | None = None      # the file's clock: its steps and breaks


@dataclass(eq=False)
class Capture:
    path: str
    format: str                       # "pcap" | "pcapng" (| "tshark" for the reference engine)
    compressed: bool
    file_size: int
    interfaces: list[dict]
    arrays: dict                      # column name (schema's, and the fast reader's
    #                                   DECODE_FACTS) -> raw array, or a function making it
    layers: dict                      # layer name -> bool mask or function (frame: all rows)
    addresses: np.ndarray             # object array of address strings; ip_src/ip_dst are codes
    engine: str = "fast"
    kernel: str = "c"
    warnings: list[str] = field(default_factory=list)
    derived: dict = field(default_factory=dict, repr=False)  # streams' facts, computed once
    whole: WholeFile | None = None    # set when the table holds only the rows an analysis needs
    _packets: object = field(default=None, repr=False)  # the cached DataFrame

    def __post_init__(self):
        if self.whole is not None:     # a partial table holds what it was given, no more
            return
        self.layers.setdefault(schema.STREAM, lambda: self.layer(schema.TCP) | self.layer(schema.UDP))
        self.arrays.setdefault("direction", self._directions)

    def __len__(self) -> int:
        return len(self.arrays["frame_time_ns"])

    def __repr__(self) -> str:
        return (f"<Capture {self.path!r}: {len(self)} packets, {self.format}"
                f"{' (gzip)' if self.compressed else ''}, engine={self.engine}>")

    def _directions(self) -> np.ndarray:
        if "direction" not in self.derived:
            tcp, udp = self.layer(schema.TCP), self.layer(schema.UDP)
            pick = lambda name: np.where(udp, self.column(f"udp_{name}"),  # noqa: E731
                                         self.column(f"tcp_{name}"))
            self.derived["direction"] = streams.packet_directions(
                tcp, udp, pick("stream"), self.column("ip_src"), pick("srcport"),
                self.column("l4_quoted"))
        return self.derived["direction"]

    def column(self, name: str) -> np.ndarray:
        """Raw array of a column; its values are meaningful where ``present(name)``."""
        try:
            value = self.arrays[name]
        except KeyError:
            known = name in schema.BY_NAME or name in schema.DECODE_BY_NAME
            if self.whole is not None and known:
                raise LookupError(f"column {name!r} was not read for this analysis: add it to "
                                  "its Needs") from None
            raise UsageError(f"no column named {name!r}",
                             hint="`pcapstats columns` lists them") from None
        return value() if callable(value) else value

    def column_at(self, name: str, rows) -> np.ndarray:
        """``column(name)[rows]``, a derived column computed at those rows alone."""
        value = self.arrays.get(name)
        return value.at(rows) if isinstance(value, AtRows) else self.column(name)[rows]

    def layer(self, layer: str) -> np.ndarray:
        """Bool mask of the packets that carry a layer (schema.IP, schema.TCP, ...)."""
        if layer == schema.FRAME:
            return np.ones(len(self), bool)
        try:
            value = self.layers[layer]
        except KeyError:
            raise LookupError(f"layer {layer!r} was not read for this analysis: add it to "
                              "its Needs") from None
        return value() if callable(value) else value

    def layer_count(self, layer: str) -> int:
        """Packets of the whole file that carry ``layer`` (for saying what a capture has, even
        when this table holds only some of its rows)."""
        if self.whole is not None:
            return self.whole.layer_counts[layer]
        return int(np.count_nonzero(self.layer(layer)))

    @property
    def whole_or_path(self) -> Capture | str:
        """What to analyse again for one stream's whole-file answer later (a figure, a check):
        this table when it holds the whole file, else the file's path (a partial table, such
        as a batch of a spilled read, holds only some streams' rows)."""
        return self if self.whole is None else self.path

    @property
    def packets_in_file(self) -> int:
        return self.whole.packets if self.whole is not None else len(self)

    def holds(self) -> str:
        """What the whole file holds (:func:`holdings`), for a "found nothing" message."""
        return holdings(self.packets_in_file, self.counted(()))

    def restricted(self, rows: np.ndarray, needs: Needs | None = None) -> Capture:
        """A Capture of only ``rows`` (a bool mask or indices), every column and layer (or
        those ``needs`` names) materialised there; frame numbers and the capture's first time
        are kept, so an analysis given it answers as it would on the whole table."""
        columns, layers = self.kept_names(needs)
        whole = self.whole or WholeFile(len(self), self.first_time_ns, self.counted(layers),
                                        self.latest_time_ns, self.clock)
        return Capture(path=self.path, format=self.format, compressed=self.compressed,
                       file_size=self.file_size, interfaces=self.interfaces,
                       arrays={n: self.column(n)[rows] for n in columns},
                       layers={n: self.layer(n)[rows] for n in layers},
                       addresses=self.addresses, engine=self.engine, kernel=self.kernel,
                       warnings=list(self.warnings), whole=whole)

    def kept_names(self, needs: Needs | None) -> tuple[list[str], list[str]]:
        """(columns, layers) a table restricted for ``needs`` holds (None: every one)."""
        names = needs.names if needs is not None else (
            [c.name for c in schema.COLUMNS] + ["direction"] + list(schema.DECODE_BY_NAME)
            + list(self.layers))
        return [n for n in names if n in self.arrays], [n for n in names if n in self.layers]

    def counted(self, layers) -> dict[str, int]:
        """Packets with each layer (those error messages name, and ``layers``) in this table
        (or, for a partial one, in the whole file)."""
        return {n: self.layer_count(n) for n in (*_COUNTED, *layers) if n in self.layers
                or (self.whole is not None and n in self.whole.layer_counts)}

    def present(self, name: str) -> np.ndarray:
        """Bool mask of the rows where the column has a value."""
        return self.layer(schema.BY_NAME[name].layer if name in schema.BY_NAME else schema.FRAME)

    @property
    def first_time_ns(self) -> int | None:
        """The time of the file's first packet (times in results count from it)."""
        if self.whole is not None:
            return self.whole.first_time_ns
        t = self.arrays["frame_time_ns"]
        return int(t[0]) if len(t) else None

    @property
    def clock(self) -> ClockCheck:
        """The file's clock (:class:`pcapstats.clock.ClockCheck`): where it stepped, so
        ``clock.pieces()`` cuts its timeline at the breaks.  The whole file's, even when this
        table holds some of its rows: the reader's, else found from this table's times."""
        check = self.derived.get("clock")
        if check is None:
            check = self.whole.clock if self.whole is not None else None
            if check is None:            # (a table without the reader's: its rows' clock)
                check = ClockCheck()
                frames = self.column("frame_number") if "frame_number" in self.arrays else None
                check.feed(self.column("frame_time_ns"), frames)
            self.derived["clock"] = check
        return check

    def joined(self) -> Capture:
        """This capture with its times on the timeline joined across its clock's breaks
        (``clock.Pieces.monotonic``): every other column shared, the stream layer's facts
        derived anew from the new times; itself when its clock never broke.  What a study
        measures over the pieces of a stepped clock."""
        pieces = self.clock.pieces()
        if len(pieces) == 1:
            return self
        t = pieces.monotonic(self.column("frame_time_ns"), self.column("frame_number"))
        arrays = dict(self.arrays, frame_time_ns=t)
        first = self.first_time_ns
        if "frame_time_epoch" in arrays:
            arrays["frame_time_epoch"] = lambda: t / 1e9
        if "frame_time_relative" in arrays:
            arrays["frame_time_relative"] = lambda: (t - first) / 1e9 if len(t) else t / 1e9
        check = ClockCheck()
        check.feed(t, self.column("frame_number"))
        whole = None if self.whole is None else WholeFile(
            self.whole.packets, first, self.whole.layer_counts,
            self.clock.first_ns + self.clock.span_ns(), check)   # (the file's last, joined)
        joined = Capture(path=self.path, format=self.format, compressed=self.compressed,
                         file_size=self.file_size, interfaces=self.interfaces, arrays=arrays,
                         layers=dict(self.layers), addresses=self.addresses,
                         engine=self.engine, kernel=self.kernel, warnings=list(self.warnings),
                         whole=whole)
        joined.derived["clock"] = check
        if "direction" in self.derived:                   # (time plays no part in it)
            joined.derived["direction"] = self.derived["direction"]
        return joined

    @property
    def latest_time_ns(self) -> int | None:
        """The file's largest timestamp: where it ends, whatever order the clock gave."""
        if self.whole is not None:
            return self.whole.latest_time_ns
        t = self.arrays["frame_time_ns"]
        return int(t.max()) if len(t) else None

    @property
    def packets(self):
        """The packet table as a pandas DataFrame (built once, then cached)."""
        import pandas as pd
        if self._packets is None:
            self._packets = pd.DataFrame({c.name: self._series(c) for c in schema.COLUMNS},
                                         copy=False)
        return self._packets

    def _series(self, col: schema.Column):
        import pandas as pd
        raw = self.column(col.name)
        mask = None if col.layer == schema.FRAME else ~self.layer(col.layer)
        if col.dtype == "category":   # addresses, or the words a column's codes stand for
            codes = np.where(mask, -1, raw) if mask is not None else raw
            words = col.values or self.addresses
            return pd.Categorical.from_codes(codes, categories=pd.Index(words, dtype=object),
                                             validate=False)
        if mask is None:
            return raw
        if col.dtype == "bool":
            return pd.arrays.BooleanArray(np.ascontiguousarray(raw, bool), mask.copy())
        if col.dtype == "float64":
            return np.where(mask, np.nan, raw)
        return pd.arrays.IntegerArray(np.ascontiguousarray(raw), mask.copy())

    def _repr_html_(self) -> str:  # notebooks: a summary, not a million rows
        return (f"<b>{self.path}</b>: {len(self)} packets ({self.format}"
                f"{', gzip' if self.compressed else ''}); "
                f"<code>.packets</code> for the table, <code>ps.throughput(cap)</code> per stream")
