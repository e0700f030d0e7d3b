"""Hand-built TCP conversations for tests whose answers are known by construction.

A conversation is a list of :func:`P` packets (relative sequence numbers, the analysis flags
each must get); :func:`write_conversation` writes it as a nanosecond pcap.
"""

from __future__ import annotations

from pathlib import Path

import craft


CLIENT, SERVER = 0, 1
ISN = (1_000_000, 7_000_000)   # raw initial sequence numbers; packets below give them relative
MS = 1_000_000
A, PA, SA, S_, FA = craft.ACK, craft.PSH | craft.ACK, craft.SYN | craft.ACK, craft.SYN, \
    craft.FIN | craft.ACK


def P(who, t_ms, flags, seq, ack, data=0, win=1000, opts=(), expect=(), **values):
    """One packet of a crafted conversation: relative seq/ack, the flags it must get (all
    others must be absent) and any column values known by construction."""
    return dict(who=who, t_ms=t_ms, flags=flags, seq=seq, ack=ack, data=data, win=win,
                opts=opts, expect=frozenset(expect), values=values)



def write_conversation(packets, path: Path) -> Path:
    """The packets as a nanosecond pcap: client 192.0.2.1:40000, server 198.51.100.2:80."""
    ends = ((craft.A4, 40000), (craft.B4, 80))
    records = []
    for p in packets:
        (src, sport), (dst, dport) = ends[p["who"]], ends[1 - p["who"]]
        seq = (ISN[p["who"]] + p["seq"]) & 0xFFFFFFFF
        ack = (ISN[1 - p["who"]] + p["ack"]) & 0xFFFFFFFF if p["flags"] & craft.ACK else 0
        segment = craft.tcp(sport, dport, seq=seq, ack=ack, flags=p["flags"], window=p["win"],
                            options=p["opts"], payload=b"x" * p["data"])
        frame = craft.ether(craft.ipv4(segment, src, dst))
        records.append(craft.Record(frame, craft.BASE_NS + round(p["t_ms"] * MS)))
    path.write_bytes(craft.pcap(records, craft.LT_ETHERNET, nano=True).data)
    return path
