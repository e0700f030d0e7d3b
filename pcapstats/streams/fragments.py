"""IP-fragment reassembly as far as the analyses need it: the whole datagram a first
fragment (the row with the transport header) stands for, and when its receiver had it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .. import schema

if TYPE_CHECKING:
    from ..capture import Capture


REASSEMBLY_NS = 30 * 10**9   # Linux's ipfrag_time: fragments further apart are not one datagram


def whole_datagrams(cap: "Capture", rows: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each of ``rows``: the IP payload bytes of its whole datagram, when the last of its
    fragments was captured, and that fragment's row.  A datagram over the MTU travels in IPv4
    fragments and only the first carries the transport header (the row an analysis holds); its
    receiver has it when the last fragment arrives.  The fragments of a datagram share source,
    destination and IP identification: each later fragment belongs to the last first fragment
    with its key captured before it (else, when a sender sends its fragments last first, the
    first one after it), within REASSEMBLY_NS of it on the capture's timeline joined across
    clock breaks (``clock.Pieces.monotonic``), so a clock step between fragments parts none
    and an identification used again later is another datagram; the last is the one captured
    last.  Rows that are no first fragment keep their own IP payload, time
    and row.  (IPv6 fragments are not followed.)"""
    rows = np.asarray(rows, np.int64)
    carried = (cap.column("ip_len")[rows].astype(np.int64)
               - cap.column("ip_hdr_len")[rows].astype(np.int64))
    last = rows.copy()
    first = (cap.layer(schema.IP)[rows] & cap.column("ip_fragment")[rows].astype(bool)
             & (cap.column("ip_frag_offset")[rows] == 0))
    if first.any():
        _add_fragments(cap, rows[first], np.flatnonzero(first), carried, last)
    return carried, cap.column("frame_time_ns")[last].astype(np.int64), last


def _add_fragments(cap: "Capture", heads: np.ndarray, index: np.ndarray, carried: np.ndarray,
                   last: np.ndarray) -> None:
    """whole_datagrams' later fragments: each added to the datagram of the first fragment
    ``heads[k]`` (``index[k]``: its place in ``carried`` and ``last``) it belongs to."""
    rest = np.flatnonzero(cap.layer(schema.IP) & cap.column("ip_fragment").astype(bool)
                          & (cap.column("ip_frag_offset") > 0))
    if not len(rest):
        return

    def key(r: np.ndarray) -> np.ndarray:
        return ((cap.column("ip_src")[r].astype(np.int64) << 40)
                ^ (cap.column("ip_dst")[r].astype(np.int64) << 16)
                ^ cap.column("ip_id")[r].astype(np.int64))
    # a key's first fragments in the capture's order, as (key number, row) codes
    _, which = np.unique(np.r_[key(heads), key(rest)], return_inverse=True)
    which = which.ravel().astype(np.int64)
    span = len(cap) + 1
    head_code, rest_code = which[:len(heads)] * span + heads, which[len(heads):] * span + rest
    by_code = np.argsort(head_code, kind="stable")
    sorted_code = head_code[by_code]
    after = np.searchsorted(sorted_code, rest_code)            # the nearest one after, if any
    before = after - 1
    same = which[len(heads):]
    ok_before = (before >= 0) & (sorted_code[np.maximum(before, 0)] // span == same)
    ok_after = (after < len(heads)) & (
        sorted_code[np.minimum(after, len(heads) - 1)] // span == same)
    frame = cap.column("frame_number")
    t = cap.clock.pieces().monotonic(cap.column("frame_time_ns"), frame)
    head_rows = heads[by_code]
    cand_before = head_rows[np.maximum(before, 0)]
    cand_after = head_rows[np.minimum(after, len(heads) - 1)]
    near_before = ok_before & (np.abs(t[rest] - t[cand_before]) <= REASSEMBLY_NS)
    near_after = ok_after & (np.abs(t[cand_after] - t[rest]) <= REASSEMBLY_NS)
    take_after = near_after & ~near_before
    owner = np.where(take_after, np.minimum(after, len(heads) - 1), before)
    belongs = near_before | near_after
    if not belongs.any():
        return
    at = index[by_code[owner[belongs]]]
    rest = rest[belongs]
    np.add.at(carried, at, cap.column("ip_len")[rest].astype(np.int64)
              - cap.column("ip_hdr_len")[rest].astype(np.int64))
    np.maximum.at(last, at, rest)                          # the one captured last
