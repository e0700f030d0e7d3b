"""A packet's own transport header and its direction within its stream.

- **own transport header** (:func:`own_transport`): a packet's TCP/UDP header is its own, not
  one quoted inside an ICMP error.  Wireshark gives a quoted header a stream index too, but its
  conversation tables leave those packets out;
- **direction** (:func:`packet_directions`): side A of a stream is the source (address, port)
  of its first packet with an own header (of its first quoted one when it has none, as
  Wireshark's filters see it); a packet whose source address and port are A's goes ``a_to_b``,
  every other packet of the stream ``b_to_a``.  tshark 4.0's ``-z conv`` names side A the same
  way (newer Wireshark versions order the sides by port instead).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .. import schema
from ..errors import UsageError

if TYPE_CHECKING:
    from ..capture import Capture

DIRECTIONS = schema.DIRECTIONS   # direction codes 0 and 1, by name
PROTOS = ("tcp", "udp")


def own_transport(cap: "Capture", proto: str | None = None) -> np.ndarray:
    """Mask of the packets whose TCP (``proto="tcp"``), UDP (``"udp"``) or either (None) header
    is their own, not one quoted inside an ICMP error: the packets Wireshark's conversation
    tables count."""
    if proto is None:
        layer = cap.layer(schema.STREAM)
    elif proto in PROTOS:
        layer = cap.layer(schema.TCP if proto == "tcp" else schema.UDP)
    else:
        raise UsageError(f"unknown protocol {proto!r}", hint="use tcp or udp")
    return layer & ~cap.column("l4_quoted")


def packet_directions(tcp, udp, stream, src, sport, quoted) -> np.ndarray:
    """Per packet: 0 (a_to_b) or 1 (b_to_a) within its stream, 0 where it has none.

    tcp, udp: layer masks; stream: tcp.stream / udp.stream; src: source address codes; sport:
    source ports; quoted: the transport header is quoted inside an ICMP error.  Side A is the
    source of the stream's first packet with an own header, else of its first quoted one."""
    n = len(stream)
    out = np.zeros(n, np.uint8)
    rows = np.flatnonzero(tcp | udp)
    if len(rows) == 0:
        return out
    n = len(rows)
    key = stream[rows].astype(np.int64) * 2 + udp[rows]          # (stream, proto), both protos
    where = np.arange(n, dtype=np.int64)
    first = np.full(int(key.max()) + 1, 2 * n, np.int64)
    np.minimum.at(first, key, np.where(quoted[rows], n + where, where))  # own packets first
    a = first[key] % n
    source = src[rows].astype(np.int64) << 16 | sport[rows].astype(np.int64)
    out[rows] = source != source[a]
    return out
