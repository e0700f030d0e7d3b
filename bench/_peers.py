"""The Python contestants, each run by ``bench/ingest.py`` as its own fresh process.

    python bench/_peers.py TOOL FILE [--kernel K]

Each does the same job its own way -- read every packet of FILE and count TCP packets per
stream (per 4-tuple where the tool has no stream index) -- and prints one JSON line:
``packets`` (frames read), ``tcp_streams``, ``work_s`` (seconds of reading and counting,
after interpreter start-up and imports) and ``import_s``. The whole process, start-up
included, is timed by the caller.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter

T_START = time.perf_counter()


def pcapstats_read(path: str, kernel: str, throughput: bool) -> dict:
    """``ps.read`` (and ``ps.throughput``) as a notebook would call them.  pandas (which
    ps.throughput's DataFrame needs, and pcapstats imports only then) is imported before the
    clock starts, like every other library import here."""
    import pcapstats as ps
    if throughput:
        import pandas  # noqa: F401
    t0 = time.perf_counter()
    cap = ps.read(path, kernel=kernel)
    t_read = time.perf_counter() - t0
    out = {"packets": len(cap), "read_s": t_read, "import_s": t0 - T_START}
    if throughput:
        table = ps.throughput(cap).table()
        out["tcp_streams"] = int((table["proto"] == "tcp").sum())
    out["work_s"] = time.perf_counter() - t0
    return out


def pcapstats_stream(path: str, kernel: str) -> dict:
    """``ps.throughput(path)``: the same table in one pass over 4 MiB windows, keeping no
    packet table (what the ``pcapstats throughput`` command runs)."""
    import pcapstats as ps
    t0 = time.perf_counter()
    result = ps.throughput(path, kernel=kernel)
    table = result.table()
    return {"packets": result.packets, "tcp_streams": int((table["proto"] == "tcp").sum()),
            "work_s": time.perf_counter() - t0, "import_s": t0 - T_START}


def dpkt_count(path: str) -> dict:
    """The classic dpkt loop: parse Ethernet/IP/TCP of every packet, count per 4-tuple."""
    import dpkt
    t0 = time.perf_counter()
    flows: Counter = Counter()
    packets = 0
    with open(path, "rb") as f:
        for _ts, buf in dpkt.pcap.UniversalReader(f):
            packets += 1
            try:
                ip = dpkt.ethernet.Ethernet(buf).data
            except dpkt.UnpackError:
                continue
            if isinstance(ip, dpkt.ip.IP) and isinstance(ip.data, dpkt.tcp.TCP):
                tcp = ip.data
                flows[_conv(ip.src, tcp.sport, ip.dst, tcp.dport)] += 1
    return {"packets": packets, "tcp_streams": len(flows), "work_s": time.perf_counter() - t0,
            "import_s": t0 - T_START}


def _conv(a, pa, b, pb) -> tuple:
    """A direction-free key for a 4-tuple (both directions are one conversation)."""
    return min((a, pa, b, pb), (b, pb, a, pa))


def scapy_count(path: str) -> dict:
    """scapy's streaming reader (``rdpcap`` would also hold every packet object at once)."""
    from scapy.layers.inet import IP, TCP
    from scapy.utils import PcapReader
    t0 = time.perf_counter()
    flows: Counter = Counter()
    packets = 0
    with PcapReader(path) as reader:
        for pkt in reader:
            packets += 1
            if IP in pkt and TCP in pkt:
                ip, tcp = pkt[IP], pkt[TCP]
                flows[_conv(ip.src, tcp.sport, ip.dst, tcp.dport)] += 1
    return {"packets": packets, "tcp_streams": len(flows), "work_s": time.perf_counter() - t0,
            "import_s": t0 - T_START}


def pyshark_count(path: str) -> dict:
    """pyshark's FileCapture (tshark dissecting to PDML underneath), counting per tcp.stream."""
    import pyshark
    t0 = time.perf_counter()
    flows: Counter = Counter()
    packets = 0
    cap = pyshark.FileCapture(path, keep_packets=False)
    try:
        for pkt in cap:
            packets += 1
            if "TCP" in pkt:
                flows[pkt.tcp.stream] += 1
    finally:
        cap.close()
    return {"packets": packets, "tcp_streams": len(flows), "work_s": time.perf_counter() - t0,
            "import_s": t0 - T_START}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tool", choices=["pcapstats-read", "pcapstats-throughput", "pcapstats-stream",
                                     "dpkt", "scapy", "pyshark"])
    ap.add_argument("file")
    ap.add_argument("--kernel", default="auto")
    a = ap.parse_args()
    if a.tool == "pcapstats-stream":
        out = pcapstats_stream(a.file, a.kernel)
    elif a.tool.startswith("pcapstats"):
        out = pcapstats_read(a.file, a.kernel, a.tool == "pcapstats-throughput")
    else:
        out = {"dpkt": dpkt_count, "scapy": scapy_count, "pyshark": pyshark_count}[a.tool](a.file)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
