"""Writing the sidecar (the format and its reading side: pcapstats.sidecar), and looking up the
stream ids of a run's flows in its captures."""

from __future__ import annotations

import ipaddress
import json
import os
from pathlib import Path

from pcapstats.reader import read
from pcapstats.sidecar import partial_path
from pcapstats.streams import stream_summary


def write_atomically(path: Path, text: str) -> None:
    """Write text to path through a hidden partial file, fsync'd, then renamed into place."""
    tmp = partial_path(path)
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_sidecar(path: str | os.PathLike, data: dict) -> None:
    """One top-level field a line, each value compact (the TCP_INFO series stay short)."""
    lines = [f"{json.dumps(key)}: {json.dumps(value, separators=(',', ':'), default=_jsonable)}"
             for key, value in data.items()]
    write_atomically(Path(path), "{\n" + ",\n".join(lines) + "\n}\n")


def _jsonable(value):
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


# -- stream ids -------------------------------------------------------------------------------

def stream_ids(capture: str | os.PathLike, flows: list[dict]) -> list[int | None]:
    """Each flow's tcp.stream / udp.stream in the capture, found by its 5-tuple (either way) in
    the streams layer's per-stream summary (packets quoted inside ICMP errors do not count).
    When a 5-tuple makes several streams (port reuse) the first one that starts at or after the
    flow's start_ns is taken."""
    cap = read(capture)
    t0 = cap.first_time_ns or 0
    summaries = {proto: stream_summary(cap, proto=proto) for proto in ("tcp", "udp")}
    out = []
    for flow in flows:
        s = summaries[flow["proto"]]
        a = (_canonical(flow["src"]), flow["sport"])
        b = (_canonical(flow["dst"]), flow["dport"])
        ends = [{(s["address_a"][k], int(s["port_a"][k])), (s["address_b"][k], int(s["port_b"][k]))}
                for k in range(len(s["stream"]))]
        rows = [k for k, e in enumerate(ends) if e == {a, b}]
        if len(rows) > 1 and flow.get("start_ns"):
            later = [k for k in rows if t0 + round(s["rel_start_s"][k] * 1e9) >= flow["start_ns"]]
            rows = later or rows
        out.append(int(s["stream"][rows[0]]) if rows else None)
    return out


def _canonical(address: str) -> str:
    """Addresses as pcapstats prints them (IPv6 compressed, IPv4-mapped kept as given)."""
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return address
