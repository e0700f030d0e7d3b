"""Edits of real capture files for tests of what analyses do with odd input (classic pcap)."""

from __future__ import annotations

import struct


def records(data: bytes) -> list[int]:
    """File offsets of each record header of a classic pcap (either byte order)."""
    order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    out, off = [], 24
    while off + 16 <= len(data):
        out.append(off)
        off += 16 + struct.unpack_from(order + "I", data, off + 8)[0]
    return out


def shift_seconds(data: bytes, packet: int, seconds: int) -> bytes:
    """The capture with packet ``packet`` (1-based) moved by ``seconds`` (its ts_sec field)."""
    out = bytearray(data)
    order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    at = records(data)[packet - 1]
    struct.pack_into(order + "I", out, at, struct.unpack_from(order + "I", data, at)[0] + seconds)
    return bytes(out)


def step_from(data: bytes, packet: int, seconds: int) -> bytes:
    """The capture with the clock stepped by ``seconds`` at packet ``packet`` (1-based): that
    record and every later one moved (its ts_sec field), as NTP stepping the capturing host's
    clock mid-capture does; the packets and their order unchanged."""
    out = bytearray(data)
    order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    for at in records(data)[packet - 1:]:
        moved = struct.unpack_from(order + "I", data, at)[0] + seconds
        struct.pack_into(order + "I", out, at, moved)
    return bytes(out)
