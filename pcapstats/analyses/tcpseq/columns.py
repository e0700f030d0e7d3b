"""The per-packet columns the TCP analyses share (``packet_analysis``): each made from the
analyser's inputs and outputs (``_MADE``), as raw numpy columns; what each means is
``tcp_analysis``'s docstring.
"""

from __future__ import annotations

import numpy as np

from ...capture import Capture
from ...errors import UsageError
from ...streams import own_transport
from .contract import FLAG_BITS, OUTPUTS, RETRANSMISSIONS
from .inputs import analysis_inputs
from .kernel import new_analyser, run_analyser

FLAG_COLUMNS = ("retransmission", *(c for c in FLAG_BITS if c != "generic_retransmission"))
PIECE_ROWS = 1 << 16    # packets the analyser is fed at a time when columns come with masks
OUTPUT_DTYPES = dict(OUTPUTS)


def packet_analysis(cap: Capture, stream: int | None = None, kernel: str = "auto", *,
                    columns: tuple[str, ...] | None = None, masks: bool = False,
                    sampled: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """The same numbers for the other TCP analyses, as raw numpy columns: ``tcp_stream``,
    ``direction`` as 0 (a_to_b) / 1, optional numbers float64 with NaN where absent (exact:
    every value is below 2^53); ``row``: each packet's row in ``cap`` (int32 in a table of
    under 2^31 rows).  ``columns``: only these, each made when asked (the analyser writes
    only the outputs they read) and every analyser array let go after its last use (a long
    stream's unused columns cost 8 bytes a packet each, and the analyser's ~140 bytes a
    packet are not all held beside the answer).
    ``masks``: each optional column as the analyser gives it (integers, not float64: no copy,
    4-8 bytes a packet less) with where it is present as ``has_<name>`` beside it, the
    analyser fed PIECE_ROWS packets at a time (its state carried: the same numbers), so its
    arrays of every output are never all held at once; ``sampled`` (with ``masks``): these
    optional columns as their values where present alone, as runs of equal values
    (:func:`runs`: ``name`` the runs' values, ``<name>_runs`` their lengths)."""
    names = tuple(_MADE) if columns is None else columns
    rows, inputs = analysis_inputs(cap, stream, timestamps="ts_rtt_ns" in names)
    if len(cap) < 1 << 31:       # the rows as int32 (half of flatnonzero's int64) before the
        rows = rows.astype(np.int32)    # analyser's arrays are made beside them
    if stream is not None and not len(rows):
        have = np.unique(cap.column("tcp_stream")[own_transport(cap, "tcp")])
        raise UsageError(f"no TCP stream {stream} in this capture", path=cap.path,
                         hint=f"it has TCP streams {have.min()}-{have.max()}" if len(have)
                         else "it has no TCP packets")
    keys = {key for name in names for key in _MADE[name][0]}
    if masks and len(rows):
        return _in_pieces(inputs, rows, names, keys, kernel, sampled)
    src = {**inputs, **run_analyser(inputs, kernel, outputs=keys), "rows": rows}
    del inputs
    out = _assembled(src, names, masks)
    keep_as_runs(out, sampled)
    return out


def runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each run of equal values' value, its length): ``np.repeat`` of them is ``values``.  A
    stream's iRTT is one value on nearly every packet: one run, not 8 bytes a packet."""
    if not len(values):
        return values[:0], np.zeros(0, np.int64)
    starts = _run_starts(values)
    return values[starts], np.diff(np.r_[starts, len(values)])


def keep_as_runs(columns: dict[str, np.ndarray], names) -> None:
    """Each optional column of ``names`` in ``columns`` (beside its ``has_`` mask) replaced by
    its values where present as :func:`runs`: ``name`` the runs' values, ``<name>_runs``
    their lengths (as packet_analysis' ``sampled`` gives them)."""
    for name in names:
        columns[name], columns[f"{name}_runs"] = runs(columns[name][columns[f"has_{name}"]])


def _run_starts(values: np.ndarray) -> np.ndarray:
    """The index of each run of equal values' first one (``values`` not empty)."""
    return np.flatnonzero(np.r_[True, values[1:] != values[:-1]])


def _joined_runs(parts: list) -> tuple[np.ndarray, np.ndarray]:
    """The runs of the pieces' runs ``parts`` (value, length pairs) one after the other."""
    values = np.concatenate([v for v, _ in parts])
    lengths = np.concatenate([n for _, n in parts])
    if not len(values):
        return values, lengths
    starts = _run_starts(values)
    return values[starts], np.add.reduceat(lengths, starts)


# the columns that are one of the analyser's inputs (or the rows) as they are: never copied
_AS_GIVEN = {"row": "rows", "frame_number": "frame", "frame_time_ns": "t",
             "tcp_stream": "stream", "direction": "dir", "tcp_len": "seglen",
             "tcp_flags": "flags"}


def _in_pieces(inputs: dict, rows: np.ndarray, names, keys, kernel, sampled) -> dict:
    """packet_analysis' columns with masks, the analyser fed PIECE_ROWS packets at a time:
    the outputs a column is as they are written straight into that column's array of every
    row; the others into a piece's arrays, made once and zeroed for each piece, whose
    columns are copied into arrays of every row (the ``sampled`` ones kept where present)."""
    n = len(rows)
    out = {name: (rows if key == "rows" else inputs[key]) for name, key in _AS_GIVEN.items()
           if name in names}
    whole = {key: np.zeros(n, OUTPUT_DTYPES[key]) for name, key in _AS_WRITTEN.items()
             if name in names}              # zeros never written cost no memory
    out.update({name: whole[key] for name, key in _AS_WRITTEN.items() if name in names})
    if "resent" in out:
        out["resent"] = out["resent"].view(bool)
    made = [name for name in names if name not in out]
    outputs = keys - set(inputs) - {"rows"}
    piece_out = {key: np.zeros(min(PIECE_ROWS, n), OUTPUT_DTYPES[key]) for key in outputs
                 if key not in whole and key in OUTPUT_DTYPES}
    analyser = new_analyser(kernel)
    kept: dict[str, list] = {name: [] for name in sampled}
    for a in range(0, n, PIECE_ROWS):
        b = min(a + PIECE_ROWS, n)
        piece = {key: values[a:b] for key, values in inputs.items()}
        given = {key: values[a:b] for key, values in whole.items()}
        for key, values in piece_out.items():
            values.fill(0)                  # as a fresh output: written where it has a value
            given[key] = values[:b - a]
        src = {**piece, **run_analyser(piece, analyser=analyser, whole=b == n, given=given)}
        if "rows" in keys:
            src["rows"] = rows[a:b]
        del piece, given
        for name in out.keys() & _AS_WRITTEN.keys():     # their masks, where optional
            present = _MADE[name][1](src)[1]
            if present is not None:
                out.setdefault(f"has_{name}", np.empty(n, bool))[a:b] = present
        columns = _assembled(src, made, masks=True)
        for name in sampled:
            kept[name].append(runs(columns.pop(name)[columns[f"has_{name}"]]))
        for name, values in columns.items():
            if name not in out:
                out[name] = np.empty(n, values.dtype)
            out[name][a:b] = values         # (copied before the piece's arrays are zeroed)
    for name in sampled:
        out[name], out[f"{name}_runs"] = _joined_runs(kept[name])
    return out


# the columns that are an analyser output as it is (with masks): written into their own array
_AS_WRITTEN = {"tcp_seq": "rel_seq", "tcp_ack": "rel_ack", "tcp_nxtseq": "nxtseq",
               "tcp_window_size": "window_size", "bytes_in_flight": "bytes_in_flight",
               "resent": "resent"}


def _assembled(src: dict[str, np.ndarray], names, masks: bool = False) -> dict[str, np.ndarray]:
    """The columns ``names`` (of _MADE) from the analyser's inputs and outputs (and ``rows``)
    in ``src``, each array taken out of ``src`` after its last use (``masks``: as
    packet_analysis')."""
    uses: dict[str, int] = {}
    for name in names:
        for key in _MADE[name][0]:
            uses[key] = uses.get(key, 0) + 1
    for key in [k for k in src if k not in uses]:
        del src[key]                                # the analyser's own inputs, unasked outputs
    out = {}
    for name in names:
        keys, make = _MADE[name]
        value, present = make(src)
        if present is None:
            out[name] = value
        elif masks:
            out[name], out[f"has_{name}"] = value, present
        else:
            out[name] = np.where(present, value, np.nan)
        for key in keys:
            uses[key] -= 1
            if not uses[key]:
                del src[key]
    return out


def analysed(src: dict[str, np.ndarray], names, at: np.ndarray | None = None, *,
             masks: bool = False) -> dict[str, np.ndarray]:
    """The columns ``names`` packet_analysis gives (``masks``: as it gives them with masks),
    made from one run of the analyser (its inputs and outputs and the analysed ``rows``, as
    AnalysedWindows hands them over), at the packets ``at`` of them (all when None)."""
    names = tuple(names)
    keys = {key for name in names for key in _MADE[name][0]}
    return _assembled({k: (src[k] if at is None else src[k][at]) for k in keys}, names, masks)



def _flag(bits: int):
    return (("aflags",), lambda v: ((v["aflags"] & bits) != 0, None))


def _optional(key: str, *also: str, when=None):
    """A column from the analyser's ``key``, present where ``when(v)`` (default: non-zero)."""
    test = when or (lambda v: v[key] != 0)
    return ((key, *also), lambda v: (v[key], test(v)))


def _generic_rto(v) -> np.ndarray:
    return ((v["aflags"] & FLAG_BITS["generic_retransmission"]) != 0) & (v["rto"] != 0)


# each column packet_analysis gives: (the analyser inputs and outputs it reads, how it is made
# from them: (values, where present or None)); see the module docstring for what each means
_MADE = {
    "row": (("rows",), lambda v: (v["rows"], None)),
    "frame_number": (("frame",), lambda v: (v["frame"], None)),
    "frame_time_ns": (("t",), lambda v: (v["t"], None)),
    "tcp_stream": (("stream",), lambda v: (v["stream"], None)),
    "direction": (("dir",), lambda v: (v["dir"], None)),
    "tcp_len": (("seglen",), lambda v: (v["seglen"], None)),
    "tcp_flags": (("flags",), lambda v: (v["flags"], None)),     # the header's, as read
    "tcp_seq": (("rel_seq",), lambda v: (v["rel_seq"], None)),
    "tcp_ack": (("rel_ack",), lambda v: (v["rel_ack"], None)),
    "tcp_nxtseq": _optional("nxtseq", "analysed", when=lambda v: v["analysed"].astype(bool)),
    "tcp_window_size": (("window_size",), lambda v: (v["window_size"], None)),
    "window_size_scalefactor": _optional("scalefactor", "flags",
                                         when=lambda v: (v["flags"] & 0x002) == 0),
    "retransmission": _flag(RETRANSMISSIONS),
    **{name: _flag(FLAG_BITS[name]) for name in FLAG_COLUMNS if name != "retransmission"},
    "duplicate_ack_num": _optional("dupack_num"),
    "duplicate_ack_frame": _optional("dupack_frame", "dupack_num",
                                     when=lambda v: v["dupack_num"] != 0),
    "bytes_in_flight": _optional("bytes_in_flight"),
    "push_bytes_sent": _optional("push_bytes", "bytes_in_flight",
                                 when=lambda v: v["bytes_in_flight"] != 0),
    "acks_frame": _optional("acks_frame"),
    "ack_rtt_ns": _optional("ack_rtt", "acks_frame",
                            when=lambda v: (v["acks_frame"] != 0) & (v["ack_rtt"] != 0)),
    "ack_rtt_karn_ns": _optional("ack_rtt", "acks_frame", "karn", when=lambda v: (
        (v["acks_frame"] != 0) & (v["ack_rtt"] != 0) & (v["karn"] != 0))),
    "ts_rtt_ns": (("ts_rtt", "ts_ok"), lambda v: (v["ts_rtt"], v["ts_ok"] != 0)),
    "initial_rtt_ns": _optional("initial_rtt"),
    "rto_ns": _optional("rto", "aflags", when=_generic_rto),
    "rto_frame": _optional("rto_frame", "rto", "aflags", when=_generic_rto),
    "resent": (("resent",), lambda v: (v["resent"].view(bool), None)),
}
