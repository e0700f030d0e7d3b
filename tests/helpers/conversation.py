"""Hand-built TCP conversations for tests whose answers are known by construction.

A conversation is a list of :func:`P` packets (relative sequence numbers, the analysis flags
each must get); :func:`write_conversation` writes it as a nanosecond pcap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers import craft


CLIENT, SERVER = 0, 1
ISN = (1_000_000, 7_000_000)   # raw initial sequence numbers; packets below give them relative
MS = 1_000_000
A, PA, SA, S_, FA = craft.ACK, craft.PSH | craft.ACK, craft.SYN | craft.ACK, craft.SYN, \
    craft.FIN | craft.ACK


def P(who, t_ms, flags, seq, ack, data=0, win=1000, opts=(), expect=(), ttl=64, **values):
    """One packet of a crafted conversation: relative seq/ack, the flags it must get (all
    others must be absent) and any column values known by construction."""
    return dict(who=who, t_ms=t_ms, flags=flags, seq=seq, ack=ack, data=data, win=win,
                opts=opts, expect=frozenset(expect), ttl=ttl, values=values)



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
        frame = craft.ether(craft.ipv4(segment, src, dst, ttl=p.get("ttl", 64)))
        records.append(craft.Record(frame, craft.BASE_NS + round(p["t_ms"] * MS)))
    path.write_bytes(craft.pcap(records, craft.LT_ETHERNET, nano=True).data)
    return path


SEG = 100   # sender_side's segment size


def sender_side(server_win=1000, answer_after_ms=0.01, rounds=6):
    """Captured at the client: SYN/ACK 20 ms after the SYN, the ACK at once.  The client sends
    4 segments, then each server ACK (every 20 ms... then 1 ms apart) acknowledges 2 segments
    and the client sends 2 new ones ``answer_after_ms`` later: 4 segments always in flight."""
    packets = [P(CLIENT, 0, S_, 0, 0), P(SERVER, 20, SA, 0, 1, win=server_win),
               P(CLIENT, 20.01, A, 1, 1)]
    for k in range(4):
        packets.append(P(CLIENT, 21 + 0.01 * k, PA, 1 + SEG * k, 1, SEG))
    sent, acked, t = 1 + 4 * SEG, 1, 41.0
    for _ in range(rounds):
        acked += 2 * SEG
        packets.append(P(SERVER, t, A, 1, acked, win=server_win))
        for k in range(2):
            packets.append(P(CLIENT, t + answer_after_ms + 0.01 * k, PA, sent, 1, SEG))
            sent += SEG
        t += 1.0
    return packets


# -- a connection built packet by packet (stream offsets, not a script of flags) ------------

_ENDS = (("10.0.0.1", 40000), ("10.0.0.2", 8088))   # client, server




@dataclass
class Conversation:
    """A TCP connection built packet by packet: each side's sequence number advances by what
    it sends, unless a packet names its own offset (retransmissions, overlaps).  ``write``
    lays the packets into a pcap (``snaplen`` cuts every frame)."""
    isn: tuple[int, int] = (1000, 5000)
    packets: list = field(default_factory=list)
    sent: list = field(default_factory=lambda: [0, 0])   # next offset each side sends
    acked: list = field(default_factory=lambda: [0, 0])

    def handshake(self, mss: int = 1460) -> "Conversation":
        self._raw(0, craft.SYN, self.isn[0], 0, b"", [("MSS", mss)])
        self._raw(1, craft.SYN | craft.ACK, self.isn[1], self.isn[0] + 1, b"", [("MSS", mss)])
        self._raw(0, craft.ACK, self.isn[0] + 1, self.isn[1] + 1, b"")
        return self

    def send(self, side: int, payload: bytes = b"", *, at: int | None = None, flags=craft.ACK | craft.PSH
             ) -> "Conversation":
        """``payload`` from ``side`` (0 client, 1 server) at stream offset ``at`` (default:
        next); craft.SYN counts one, so offset k is sequence number isn + 1 + k."""
        offset = self.sent[side] if at is None else at
        seq = self.isn[side] + 1 + offset
        ack = self.isn[1 - side] + 1 + self.sent[1 - side]
        self._raw(side, flags, seq, ack, payload)
        self.sent[side] = max(self.sent[side], offset + len(payload) + (1 if flags & craft.FIN else 0))
        return self

    def fin(self, side: int) -> "Conversation":
        return self.send(side, flags=craft.FIN | craft.ACK)

    def _raw(self, side, flags, seq, ack, payload, options=()):
        src, dst = _ENDS if side == 0 else _ENDS[::-1]
        l4 = craft.tcp(src[1], dst[1], seq=seq % 2**32, ack=ack % 2**32, flags=flags,
                       payload=payload, options=options)
        self.packets.append(craft.ether(craft.ipv4(l4, src[0], dst[0])))

    def write(self, path, snaplen: int = 65535, step_ns: int = 1_000_000):
        """One packet every ``step_ns`` (a multiple of 1000: microsecond pcap)."""
        ts = craft.times(len(self.packets), unit_ns=1000, step=step_ns)
        records = [craft.Record(p, t) for p, t in zip(self.packets, ts)]
        path.write_bytes(craft.pcap(records, craft.LT_ETHERNET, snaplen=snaplen).data)
        return path
