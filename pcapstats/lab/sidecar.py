"""Writing the sidecar (the format and its reading side: pcapstats.sidecar), looking up the
stream ids of a run's flows in its captures, and placing each impairment against each capture
point (``captures[].impairments``, read by :func:`pcapstats.sidecar.placements`)."""

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


# -- where each impairment sits, for each capture point -------------------------------------------

def _amounts(asked: dict, direction: str) -> list[tuple[str, str]]:
    """(what, amount) of an impairment's values on one direction of a lab router ("data":
    toward the receivers, "ack": back)."""
    out = []
    loss = asked.get("loss" if direction == "data" else "ack_loss")
    if loss:
        out.append(("loss" if direction == "data" else "ack_loss", f"{loss * 100:g} %"))
    if asked.get("delay_s"):
        out.append(("delay", f"{asked['delay_s'] * 1e3:g} ms"))
    if asked.get("jitter_s"):
        out.append(("jitter", f"{asked['jitter_s'] * 1e3:g} ms"))
    rate = asked.get("rate_bps")
    if rate and direction == "data":
        out.append(("rate", f"{rate / 1e6:g} Mbit/s"))
    if asked.get("serialize") and (direction == "data" or not asked.get("one_way")):
        out.append(("serialisation", f"at {rate / 1e6:g} Mbit/s"))
    return out


def lab_placements(doc: dict, side: str) -> list[dict]:
    """A lab run's impairments against its capture point ``side``: the routers' data direction
    (toward the receivers) acts after a sender's or the router's capture point and before
    the receiver's; the way back the other way round.  A router forwards: nothing is on the
    capturing host's own output."""
    links = doc.get("hops") or ([doc["impairment"]] if doc.get("impairment") else [])
    bottlenecks = (doc.get("topology") or {}).get("bottlenecks") or \
        [(doc.get("topology") or {}).get("bottleneck") or {}]
    pairs = (doc.get("topology") or {}).get("pairs") or []
    out = []
    for link, b in zip(links, bottlenecks):
        for direction, device, sources, packets in (
                ("data", b.get("egress"), [p["sender_ip"] for p in pairs], "toward the receiver"),
                ("ack", b.get("ingress"), [p["receiver_ip"] for p in pairs],
                 "toward the sender")):
            before = (side == "receiver") == (direction == "data")
            for what, amount in _amounts(link["asked"], direction):
                out.append({"what": what, "amount": amount, "packets": packets,
                            "sources": sources, "where": "before" if before else "after",
                            "at": f"{b.get('router')} {device}, egress", "own_egress": False})
    return out


def interface_placements(asked: dict, interface: str, addresses: list[str]) -> list[dict]:
    """``pcapstats capture``'s impairment against its own capture point: everything on the
    interface's egress acts before tcpdump sees the packets leaving it (its tap is after
    netfilter and the qdisc), on the capturing host's own output."""
    return [{"what": what, "amount": amount, "packets": f"leaving {interface}",
             "sources": list(addresses), "where": "before",
             "at": f"this host's {interface}, egress", "own_egress": True}
            for what, amount in _amounts(asked, "data")]
