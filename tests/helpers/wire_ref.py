"""A TCP connection's segments and byte streams as tshark reads them: the reference the verify
tests hold pcapstats' reading of a live capture against (nothing here uses pcapstats)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.tshark_ref import tshark_fields

FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10
_FIELDS = ("frame.number", "tcp.stream", "tcp.srcport", "tcp.dstport", "tcp.flags", "tcp.seq",
           "tcp.len", "tcp.payload")


def tcp_streams(path: Path) -> list[int]:
    """tshark's tcp.stream numbers in the capture."""
    t = tshark_fields(path, ("tcp.stream",))
    return sorted({int(x) for x in t["tcp.stream"].dropna()})


class Wire:
    """tshark's TCP segments of one connection (``stream``; None: the capture must hold
    exactly one), and each side's byte stream rebuilt from them (offset 0 = the byte after the
    SYN's sequence number)."""

    def __init__(self, path: Path, stream: int | None = None):
        t = tshark_fields(path, _FIELDS)
        t = t[t["tcp.stream"].notna()]
        if stream is None:
            assert set(t["tcp.stream"]) == {"0"}, "one TCP connection expected"
            stream = 0
        t = t[t["tcp.stream"] == str(stream)]
        self.rows = [dict(frame=int(r["frame.number"]), port=int(r["tcp.srcport"]),
                          dport=int(r["tcp.dstport"]), flags=int(r["tcp.flags"], 16),
                          seq=int(r["tcp.seq"]), len=int(r["tcp.len"]),
                          payload=bytes.fromhex(r["tcp.payload"]) if
                          isinstance(r["tcp.payload"], str) else b"")
                     for _, r in t.iterrows()]
        syn = [r for r in self.rows if r["flags"] & SYN]
        first = next(r for r in syn if not r["flags"] & ACK)
        self.client_port, self.server_port = first["port"], first["dport"]
        self.isn = {r["port"]: r["seq"] for r in syn}

    def segments(self, client: bool = True) -> list[dict]:
        """Data segments of one side, with their stream offset."""
        return [dict(r, offset=r["seq"] - self.isn[r["port"]] - 1) for r in self.rows
                if r["len"] and (r["port"] == self.client_port) == client]

    def stream(self, client: bool = True) -> bytes:
        segs = self.segments(client)
        out = bytearray(max((s["offset"] + s["len"] for s in segs), default=0))
        covered = bytearray(len(out))
        for s in segs:
            assert len(s["payload"]) == s["len"], f"frame {s['frame']}: payload cut"
            out[s["offset"]:s["offset"] + s["len"]] = s["payload"]
            covered[s["offset"]:s["offset"] + s["len"]] = b"\1" * s["len"]
        assert all(covered), "a byte of the stream is not in the capture"
        return bytes(out)

    def frame(self, number: int) -> dict:
        return next(r for r in self.rows if r["frame"] == number)

    def carries(self, number: int, offset: int, data: bytes, client: bool = True) -> bool:
        """Frame `number` is a segment of that side whose payload holds `data` at `offset`."""
        seg = next((s for s in self.segments(client) if s["frame"] == number), None)
        if seg is None:
            return False
        at = offset - seg["offset"]
        return 0 <= at and seg["payload"][at:at + len(data)] == data

    def first_carrying(self, offset: int, client: bool = True) -> int:
        """The earliest frame of that side whose segment holds the byte at ``offset``."""
        return min(s["frame"] for s in self.segments(client)
                   if s["offset"] <= offset < s["offset"] + s["len"])

    def flagged(self, bit: int, client: bool) -> list[int]:
        return [r["frame"] for r in self.rows
                if r["flags"] & bit and (r["port"] == self.client_port) == client]
