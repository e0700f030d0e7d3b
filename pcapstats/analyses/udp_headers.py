"""The headers iperf writes at the start of each UDP datagram, found and read from the bytes.

iperf numbers its UDP datagrams and stamps each with its send time, so a capture alone tells
loss, order and jitter.  Three layouts are in use (all big-endian):

- ``iperf3`` (32-bit counter, the default): send seconds (u32) @0, microseconds (u32) @4,
  packet count (u32) @8, counting 1, 2, 3 ...;
- ``iperf3-64`` (``--udp-counters-64bit``): the same with a u64 count @8;
- ``iperf2``: datagram id (s32) @0, counting 0, 1, 2 ... (negated in the final datagrams
  that end the test), send seconds (u32) @4, microseconds (u32) @8.

The send time is the sender's clock: the epoch (iperf2, old iperf3) or a monotonic clock since
boot (iperf3 3.8 and later), so only its differences mean anything.  A flow's layout is the
one under which its datagrams read as microseconds below 10^6, a counter that rises from one
datagram to the next (a few fall: reordering) by a small step (one a datagram sent, so the
step grows with the loss: 3 at 67 % loss, 100 at 99 %), and send times that advance with the
count.  Nothing in the choice depends on how many datagrams arrived or on the capture's own
clock, so a flow is read as iperf's at any loss and across a step of the capture's clock; a
flow that reads as none of them (another program, or payload cut by the snaplen) has no
layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LAYOUTS = ("iperf3", "iperf3-64", "iperf2")
HEAD_BYTES = 16                  # bytes read from each datagram (the longest layout's header)
_RISE_SHARE = 0.9                # at least this share of consecutive counts (and send times in
                                 # count order) rise: reordering lowers a few
_MAX_STEP = 2**16                # the median rise of the count: iperf's is 1 / (1 - loss)


@dataclass
class Headers:
    """What one flow's datagrams say: the layout, each datagram's count and send time (ns
    since the epoch, by the sender's clock)."""
    layout: str
    count: np.ndarray
    sent_ns: np.ndarray


# per layout: the words (big-endian u32 of the header) holding the send seconds and
# microseconds, and how the count is read from the (n, 4) words
_FIELDS = {
    "iperf3": (0, 1, lambda words: words[:, 2].astype(np.int64)),
    "iperf3-64": (0, 1, lambda words: ((words[:, 2].astype(np.uint64) << np.uint64(32))
                                       | words[:, 3]).astype(np.int64)),
    "iperf2": (1, 2, lambda words: np.abs(words.view(">i4")[:, 0].astype(np.int64))),
}


def read_headers(heads: np.ndarray) -> Headers | None:
    """The layout and fields of one flow's datagrams (``heads``: an (n, 16) uint8 array of
    their first bytes, in arrival order), or None.

    The words are a view of ``heads``, and a layout's count and send times are read from
    them only once its earlier checks pass: a flow costs one count and one send-time array,
    not a copy of its headers and every layout's fields."""
    if len(heads) < 2:
        return None
    words = np.ascontiguousarray(heads[:, :HEAD_BYTES]).view(">u4")
    for layout in LAYOUTS:
        sec, usec, count_of = _FIELDS[layout]
        if (words[:, usec] >= 10**6).any():
            continue
        count = count_of(words)
        step = np.diff(count)
        rises = step > 0
        if rises.mean() < _RISE_SHARE or np.median(step[rises]) > _MAX_STEP:
            continue
        sent = words[:, sec].astype(np.int64)
        sent *= 10**9
        sent += words[:, usec] * np.uint32(1000)     # below 10^9 (checked): a u32 holds it
        if (np.diff(sent[np.argsort(count, kind="stable")]) >= 0).mean() < _RISE_SHARE:
            continue     # stamps that do not advance with the count are no clock
        return Headers(layout, count, sent)
    return None
