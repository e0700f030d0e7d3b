"""802.11 cause and effect from one monitor-mode capture: per interval, the frames' throughput
beside the signal they were received at, the data rate they were sent at and the share the
senders had to send again.

Farther from an access point the signal weakens; the sender's rate control answers by
choosing a slower data rate, and frames that still fail are re-sent by 802.11 itself (the
Retry flag) before TCP sees a loss.  So "distance behaves like loss" is three numbers a
monitor-mode capture holds frame by frame: this analysis puts them per interval beside the
throughput, and ``compare`` puts one row of them beside each capture's goodput.

- **Groups** (``frames``): ``all`` (every frame of an 802.11 link type, 105 or 127), and the
  802.11 data frames (frame type 2: data, QoS data, null) by the way they went, from their To
  DS / From DS bits: ``data to AP`` (a station's to its access point), ``data from AP``,
  ``data, no AP`` (ad hoc), ``data, AP to AP`` (mesh, WDS).  A transfer's segments go one way
  and its ACKs the other, so its sender's link is one of the data rows; the ``all`` row mixes
  beacons, 802.11 acknowledgements (sent at a basic rate) and every station within reach.
- **Throughput** is frame bits, as Wireshark's I/O graph counts them with the display filter
  of the row (``wlan.fc.type == 2 && wlan.fc.ds == 1`` ...): per interval (intervals as
  iograph's, tshark io,stat's), and over the capture span (``avg_capture_bps``).  Protected
  (encrypted) frames count: their bytes crossed the air whether or not IP can be read.
- **Signal** (``signal_dbm``) and **data rate** (``datarate_bps``): medians over the row's frames
  whose radiotap header reports them (none over frames of link type 105, which have no radiotap
  header); **retries** (``retry_share``): frames with the Retry flag / the row's frames whose
  frame control was read (protocol version 0).
- ``main``: the row ``compare`` reads, the data row that carried the most bytes (the transfer's
  sender), or ``all`` when the capture has no data frames.
"""

from __future__ import annotations

import numpy as np

from .. import catalogue, schema
from ..batch import analysis
from ..capture import Capture, Needs
from ..errors import Note, NothingToReport
from ..render import Shown
from ..results import Result, shown
from ..schema import Column, TableSpec
from ..units import interval_ns
from .iograph import listed_intervals

LINK_TYPES = (105, 127)           # IEEE 802.11, and 802.11 behind radiotap
ALL = "all"
DATA_GROUPS = {ds: f"data {name}" if ds in (1, 2) else f"data, {name}"
               for ds, name in schema.WLAN_DS.items()}
ORDER = (1, 2, 0, 3)              # rows: a station's frames, the AP's, then the rarer two
READS = ("frame_time_ns", "frame_len", "link_type", "radiotap_dbm_antsignal",
         "radiotap_datarate", "wlan_fc_type", "wlan_fc_ds", "wlan_fc_retry",
         schema.RADIOTAP_SIGNAL, schema.RADIOTAP_RATE, schema.WLAN)

_C = Column
GROUP = _C("frames", "str", "the frames of the row: all (every 802.11 frame), or the data "
           "frames that went one way (to AP, from AP, no AP, AP to AP: their To/From DS bits)")
FRAMES = TableSpec("frames", "one row per group of frames over the capture", (
    GROUP,
    _C("main", "bool", "the row compare reads: the data frames that carried the most bytes "
       "(all when there are none)"),
    _C("packets", "int64", "frames of the row", "packets"),
    _C("bytes", "int64", "frame bytes of the row (frame.len: radiotap header included, as "
       "Wireshark counts it)", "bytes"),
    catalogue.column("avg_capture_bps", doc="here of the row's frames", optional=False),
    catalogue.column("peak_bps", doc="here of the row's frames", optional=False),
    catalogue.column("signal_dbm"),
    catalogue.column("datarate_bps"),
    _C("retried", "int64", "frames with the Retry flag", "packets"),
    catalogue.column("retry_share"),
))
INTERVALS = TableSpec("intervals", "one row per group and interval", (
    GROUP,
    _C("interval", "int64", "interval index k: [k x interval, (k+1) x interval) after the "
       "capture's first packet, times rounded to the microsecond as tshark's io,stat"),
    _C("start_s", "float64", "start of the interval, seconds after the capture's first packet",
       "s"),
    _C("packets", "int64", "frames of the row in the interval", "packets"),
    _C("bytes", "int64", "their frame bytes", "bytes"),
    _C("bps", "float64", "their frame bits / interval length", "bit/s"),
    catalogue.column("signal_dbm", doc="in the interval"),
    catalogue.column("datarate_bps", doc="in the interval"),
    catalogue.column("retry_share", doc="in the interval"),
))


class Wifi(Result):
    """The groups over the capture (``frames``) and per interval (``intervals``)."""
    analysis = "wifi"
    specs = (FRAMES, INTERVALS)
    series = "intervals"
    draws = True
    view = {"frames": (Shown("frames", "frames", key=True), Shown("count", "packets"),
                       shown("avg_capture_bps"), shown("peak_bps", minor=True),
                       shown("signal_dbm"), shown("datarate_bps"), shown("retry_share")),
            "intervals": (Shown("frames", "frames", key=True), Shown("time", "start_s"),
                          Shown("count", "packets"), Shown("bit/s", "bps"),
                          shown("signal_dbm"), shown("datarate_bps"), shown("retry_share"))}
    legend = {"frames": "capture avg: frame bits over the capture span, as the I/O graph. "
                        "Signal and data rate: medians of the frames that report them; "
                        "retries: frames with the Retry flag. --series for each interval."}

    def __init__(self, tables, *, capture: str, interval_ns: int, notes=()):
        super().__init__(tables, capture=capture, notes=list(notes))
        self.interval_ns = interval_ns

    def _figure(self, ax=None, **options):
        from ..plots.wifi import wifi_figure  # lazy: matplotlib only for a figure
        return wifi_figure(self, ax=ax, **options)


def rows_needed(cap: Capture) -> np.ndarray:
    """Bool mask of the rows wifi reads: the frames of an 802.11 link type."""
    return np.isin(cap.column("link_type"), LINK_TYPES)


@analysis(needs=Needs(READS, rows_needed))
def wifi(capture: Capture, *, interval: float = 1.0) -> Wifi:
    """Per group of 802.11 frames and per interval: throughput, signal, data rate, retries
    (see the module docstring)."""
    step = interval_ns(interval)
    rows = np.flatnonzero(rows_needed(capture))
    if not len(rows):
        raise NothingToReport(f"no 802.11 frames in {capture.path} ({capture.holds()})",
                              hint="wifi reads monitor-mode captures (link type 127, radiotap, "
                                   "or 105); a Wi-Fi interface in managed mode captures "
                                   "Ethernet")
    t0 = capture.first_time_ns
    span_ns = capture.latest_time_ns - t0
    frame = _frames(capture, rows)
    groups = [(ALL, np.arange(len(rows)))]
    data = frame["control"] & (frame["type"] == schema.WLAN_DATA)
    for ds in ORDER:
        mine = np.flatnonzero(data & (frame["ds"] == ds))
        if len(mine):
            groups.append((DATA_GROUPS[ds], mine))
    # each packet's interval, as iograph's (tshark io,stat's) rounding: (rel + 500) // step
    whole, part = np.divmod(frame["t"] - t0, step)
    bucket = whole + (part + 500 >= step)
    order = np.concatenate([g[np.argsort(bucket[g], kind="stable")] for _, g in groups])
    seg = np.repeat(np.arange(len(groups)), [len(g) for _, g in groups])
    b = bucket[order]                      # by group, then interval: the cells with frames
    new = np.r_[True, (seg[1:] != seg[:-1]) | (b[1:] != b[:-1])]
    k, series_seg, row_of_cell, left_out = listed_intervals(b[new], seg[new], len(order))
    cell = row_of_cell[np.cumsum(new) - 1]          # each frame's row of the series
    intervals = _per_cell(frame, order, cell, len(k), step)
    intervals.update(frames=np.array([groups[s][0] for s in series_seg], object),
                     interval=k, start_s=k * step / 1e9)
    totals = _per_cell(frame, order, seg, len(groups), step)
    per_group = np.bincount(series_seg, minlength=len(groups))
    first_row = np.r_[0, np.cumsum(per_group)[:-1]]
    peak = np.maximum.reduceat(intervals["bps"], first_row) if len(k) else np.zeros(0)
    data_bytes = [int(totals["bytes"][g]) if name != ALL else -1
                  for g, (name, _) in enumerate(groups)]
    main = int(np.argmax(data_bytes)) if len(groups) > 1 else 0
    summary = {"frames": np.array([name for name, _ in groups], object),
               "main": np.arange(len(groups)) == main,
               "packets": totals["packets"], "bytes": totals["bytes"],
               "avg_capture_bps": totals["bytes"] * 8e9 / span_ns if span_ns > 0
               else np.full(len(groups), np.nan),
               "peak_bps": peak, "signal_dbm": totals["signal_dbm"],
               "datarate_bps": totals["datarate_bps"], "retried": totals["retried"],
               "retry_share": totals["retry_share"]}
    del intervals["retried"]
    notes = []
    if left_out:
        notes.append(Note(f"{left_out} empty intervals not listed",
                          detail=f"the capture spans far more intervals of {step / 1e9:g} s "
                                 "than it has frames (a clock step, or a long idle time); each "
                                 "run of empty intervals is shown by its first"))
    if len(groups) == 1:
        notes.append(Note("no 802.11 data frames: all frames only",
                          detail="the capture holds management and control frames only "
                                 "(beacons, acknowledgements ...): no station sent data"))
    return Wifi({"frames": summary, "intervals": intervals}, capture=capture.path,
                interval_ns=step, notes=notes)


def _frames(cap: Capture, rows: np.ndarray) -> dict[str, np.ndarray]:
    """The 802.11 frames' columns this analysis reads, and which fields each has."""
    def at(name):
        return cap.column(name)[rows]

    def has(layer):
        return cap.layer(layer)[rows]
    return {"t": at("frame_time_ns").astype(np.int64), "len": at("frame_len").astype(np.int64),
            "signal": at("radiotap_dbm_antsignal").astype(np.float64),
            "has_signal": has(schema.RADIOTAP_SIGNAL),
            "rate": at("radiotap_datarate") * 1e6, "has_rate": has(schema.RADIOTAP_RATE),
            "control": has(schema.WLAN), "type": at("wlan_fc_type"), "ds": at("wlan_fc_ds"),
            "retry": at("wlan_fc_retry") & has(schema.WLAN)}


def _per_cell(frame, order, cell, n: int, step: int) -> dict[str, np.ndarray]:
    """Per cell (a group, or a group's interval) of the frames ``order`` (cell[i] is the cell
    of frame order[i]): frames, bytes, bits/s over ``step``, median signal and data rate of
    those reporting one, frames retried and their share of those with a frame control."""
    packets = np.bincount(cell, minlength=n).astype(np.int64)
    size = np.bincount(cell, weights=frame["len"][order], minlength=n)
    controlled = np.bincount(cell, weights=frame["control"][order], minlength=n)
    retried = np.bincount(cell, weights=frame["retry"][order], minlength=n).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(controlled > 0, retried / controlled, np.nan)
    return {"packets": packets, "bytes": np.rint(size).astype(np.int64),
            "bps": size * 8e9 / step,
            "signal_dbm": _medians(cell, frame["signal"][order], frame["has_signal"][order], n),
            "datarate_bps": _medians(cell, frame["rate"][order], frame["has_rate"][order], n),
            "retried": retried, "retry_share": share}


def _medians(cell, values, present, n: int) -> np.ndarray:
    """The median of ``values`` where ``present``, per cell (NaN for a cell with none): one
    sort by (cell, value), then each cell's middle one or two."""
    cell, values = cell[present], values[present]
    out = np.full(n, np.nan)
    if not len(cell):
        return out
    order = np.lexsort((values, cell))
    cell, values = cell[order], values[order]
    first = np.searchsorted(cell, np.arange(n))
    count = np.bincount(cell, minlength=n)
    some = np.flatnonzero(count)
    lo = first[some] + (count[some] - 1) // 2
    hi = first[some] + count[some] // 2
    out[some] = (values[lo] + values[hi]) / 2
    return out
