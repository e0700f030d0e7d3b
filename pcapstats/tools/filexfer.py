"""Plain TCP and UDP file transfers: a generated file from sender to receiver, checksummed.

Run inside lab hosts by :mod:`pcapstats.lab.traffic` as ``python -m pcapstats.tools.filexfer``::

    filexfer tcp-recv ADDR PORT [--rcvbuf B]
    filexfer tcp-send ADDR PORT SIZE SEED [--cc CC] [--sndbuf B]
    filexfer udp-recv ADDR PORT [--idle S]
    filexfer udp-send ADDR PORT SIZE SEED RATE_BPS [--datagram B]

The file is ``random.Random(SEED).randbytes(SIZE)``: both ends know its SHA-256 without sharing
it.  Receivers print ``ready`` once bound; every program ends by printing ONE JSON line (its
report) on stdout.

TCP: the sender writes an 8-byte big-endian length, then the file; the receiver answers with
the SHA-256 (hex) of what it read and closes.  UDP: datagrams of ``[8-byte index][chunk]`` paced
at RATE_BPS (IP payload bits), then ``END`` three times; the receiver stops at ``END`` or after
``--idle`` seconds without a datagram (every ``END`` may be lost), and reports what arrived:
distinct chunks, bytes, the indices missing, and the SHA-256 of the chunks in order (equal to
the file's only when nothing is missing).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import socket
import struct
import sys
import time

from pcapstats.addresses import family
from pcapstats.tools.tcpinfo import set_congestion, tcp_congestion

_LEN = struct.Struct("!Q")
_END = b"END"


def generated(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def _say(report: dict) -> None:
    print(json.dumps(report), flush=True)


def _endpoints(sock: socket.socket) -> dict:
    src, sport = sock.getsockname()[:2]
    dst, dport = sock.getpeername()[:2]
    return {"src": src, "sport": sport, "dst": dst, "dport": dport}


def tcp_recv(addr: str, port: int, rcvbuf: int | None) -> None:
    srv = socket.socket(family(addr), socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if rcvbuf:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    srv.bind((addr, port))
    srv.listen(1)
    print("ready", flush=True)
    conn, _ = srv.accept()
    start = time.time_ns()
    want = _LEN.unpack(conn.recv(_LEN.size, socket.MSG_WAITALL))[0]
    digest, got = hashlib.sha256(), 0
    while got < want:
        chunk = conn.recv(min(1 << 16, want - got))
        if not chunk:
            break
        digest.update(chunk)
        got += len(chunk)
    end = time.time_ns()
    conn.sendall(digest.hexdigest().encode())
    ends = _endpoints(conn)
    conn.close()
    _say({"role": "receiver", "proto": "tcp", "expected_bytes": want, "received_bytes": got,
          "sha256": digest.hexdigest(), "start_ns": start, "end_ns": end,
          # the flow as the sender sees it
          "src": ends["dst"], "sport": ends["dport"], "dst": ends["src"], "dport": ends["sport"]})


def tcp_send(addr: str, port: int, size: int, seed: int, cc: str | None,
             sndbuf: int | None) -> None:
    data = generated(size, seed)
    sock = socket.socket(family(addr), socket.SOCK_STREAM)
    if cc:
        try:
            set_congestion(sock, cc)
        except ValueError as e:
            sys.exit(f"filexfer: {e}")
    if sndbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    sock.connect((addr, port))
    start = time.time_ns()
    sock.sendall(_LEN.pack(size) + data)
    reply = b""
    while chunk := sock.recv(128):
        reply += chunk
    end = time.time_ns()
    sha = hashlib.sha256(data).hexdigest()
    used = tcp_congestion(sock)
    _say({"role": "sender", "proto": "tcp", **_endpoints(sock), "cc": used, "sent_bytes": size,
          "sha256": sha, "receiver_sha256": reply.decode(errors="replace"),
          "checksum_ok": reply.decode(errors="replace") == sha, "start_ns": start,
          "end_ns": end})
    sock.close()


def udp_recv(addr: str, port: int, idle_s: float) -> None:
    sock = socket.socket(family(addr), socket.SOCK_DGRAM)
    sock.bind((addr, port))
    print("ready", flush=True)
    chunks: dict[int, bytes] = {}
    datagrams, first_ns, last_ns, peer, ended = 0, None, None, None, False
    sock.settimeout(None)  # wait for the first datagram as long as it takes
    while True:
        try:
            data, peer = sock.recvfrom(65535)
        except socket.timeout:
            break
        sock.settimeout(idle_s)
        last_ns = time.time_ns()
        first_ns = first_ns or last_ns
        if data == _END:
            ended = True
            break
        datagrams += 1
        index = _LEN.unpack_from(data)[0]
        chunks.setdefault(index, data[_LEN.size:])
    top = max(chunks, default=-1)
    digest = hashlib.sha256(b"".join(chunks[k] for k in sorted(chunks)))
    _say({"role": "receiver", "proto": "udp", "datagrams": datagrams,
          "distinct_chunks": len(chunks), "received_bytes": sum(map(len, chunks.values())),
          "missing_indices": [k for k in range(top + 1) if k not in chunks],
          "end_seen": ended, "sha256": digest.hexdigest(), "start_ns": first_ns,
          "end_ns": last_ns, "peer": list(peer[:2]) if peer else None})


def udp_send(addr: str, port: int, size: int, seed: int, rate_bps: float,
             datagram: int) -> None:
    data = generated(size, seed)
    chunk = datagram - _LEN.size
    sock = socket.socket(family(addr), socket.SOCK_DGRAM)
    sock.connect((addr, port))
    every_s = datagram * 8 / rate_bps
    start, start_ns, sent = time.monotonic(), time.time_ns(), 0
    count = (size + chunk - 1) // chunk
    for k in range(count):
        sock.send(_LEN.pack(k) + data[k * chunk:(k + 1) * chunk])
        sent += 1
        wait = start + sent * every_s - time.monotonic()
        if wait > 0:
            time.sleep(wait)
    end_ns = time.time_ns()
    for _ in range(3):  # the receiver leaves at the first END to arrive: then ICMP refuses
        time.sleep(0.05)
        try:
            sock.send(_END)
        except ConnectionRefusedError:
            break
    _say({"role": "sender", "proto": "udp", **_endpoints(sock), "sent_bytes": size,
          "datagrams": count, "datagram_bytes": datagram, "rate_bps": rate_bps,
          "sha256": hashlib.sha256(data).hexdigest(), "start_ns": start_ns, "end_ns": end_ns})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="filexfer", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("tcp-recv", "tcp-send", "udp-recv", "udp-send"):
        p = sub.add_parser(name)
        p.add_argument("addr")
        p.add_argument("port", type=int)
        if name.endswith("send"):
            p.add_argument("size", type=int)
            p.add_argument("seed", type=int)
    sub.choices["tcp-recv"].add_argument("--rcvbuf", type=int)
    sub.choices["tcp-send"].add_argument("--cc")
    sub.choices["tcp-send"].add_argument("--sndbuf", type=int)
    sub.choices["udp-recv"].add_argument("--idle", type=float, default=1.0)
    sub.choices["udp-send"].add_argument("rate_bps", type=float)
    sub.choices["udp-send"].add_argument("--datagram", type=int, default=1000)
    a = parser.parse_args(argv)
    if a.cmd == "tcp-recv":
        tcp_recv(a.addr, a.port, a.rcvbuf)
    elif a.cmd == "tcp-send":
        tcp_send(a.addr, a.port, a.size, a.seed, a.cc, a.sndbuf)
    elif a.cmd == "udp-recv":
        udp_recv(a.addr, a.port, a.idle)
    else:
        udp_send(a.addr, a.port, a.size, a.seed, a.rate_bps, a.datagram)
    return 0


if __name__ == "__main__":
    sys.exit(main())
