"""Make the small real captures shipped in captures/ (run as root; about 10 seconds).

    sudo python3 captures/make_captures.py [--out captures]

Both come from pcapstats' own lab (pcapstats.lab.netns): sender - router - receiver network
namespaces joined by veth pairs (offloads off, so the capture shows wire-sized packets), tcpdump
on the receiver's eth0 with --immediate-mode.  Nothing leaves the namespaces; everything made is
removed at the end.  captures/README.md says what is in each file.
"""

from __future__ import annotations

import argparse
import select
import subprocess
import sys
import time
from pathlib import Path

from pcapstats.lab import Lab

# The application protocol of the course tool the design names: 1000-byte messages, then
# "BYE", answered by "ACK: BYE".  The sender paces itself to a target rate.
SINK = r"""
import socket, sys
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((sys.argv[1], int(sys.argv[2]))); srv.listen(1)
print("ready", flush=True)
conn, _ = srv.accept()
tail = b""
while not tail.endswith(b"BYE"):
    chunk = conn.recv(65536)
    if not chunk:
        sys.exit("sender went away before BYE")
    tail = (tail + chunk)[-3:]
conn.sendall(b"ACK: BYE")
conn.close()
"""

SENDER = r"""
import socket, sys, time
addr, port = sys.argv[1], int(sys.argv[2])
rate_bps, seconds = float(sys.argv[3]), float(sys.argv[4])
s = socket.create_connection((addr, port))
message, every = bytes(1000), 8000 / rate_bps
start = time.monotonic()
sent = 0
while time.monotonic() - start < seconds:
    s.sendall(message)
    sent += 1
    delay = start + sent * every - time.monotonic()
    if delay > 0:
        time.sleep(delay)
s.sendall(b"BYE")
reply = b""
while chunk := s.recv(64):
    reply += chunk
assert reply == b"ACK: BYE", reply
"""


def start_sink(lab: Lab, port: int) -> subprocess.Popen:
    proc = lab.popen_python("receiver", SINK, lab.address("receiver"), port,
                            stdout=subprocess.PIPE, text=True)
    if not select.select([proc.stdout], [], [], 10)[0] or proc.stdout.readline() != "ready\n":
        raise RuntimeError(f"sink on port {port} did not start")
    return proc


def tcp_2streams(lab: Lab, out: Path) -> None:
    """Two paced TCP transfers: 8 Mbit/s for 3 s, and 2 Mbit/s for 2 s starting 0.5 s later."""
    sinks = [start_sink(lab, 5001), start_sink(lab, 5002)]
    with lab.capture("receiver", "eth0", out, snaplen=128) as cap:
        first = lab.popen_python("sender", SENDER, lab.address("receiver"), 5001, 8e6, 3)
        time.sleep(0.5)
        second = lab.popen_python("sender", SENDER, lab.address("receiver"), 5002, 2e6, 2)
        for proc in (first, second, *sinks):
            if proc.wait(30) != 0:
                raise RuntimeError(f"a transfer failed: {proc.args}")
    print(f"{out}: {cap.stats.captured} packets")


def udp_ping(lab: Lab, out: Path) -> None:
    """iperf3 UDP at 1 Mbit/s for 2 s (1000-byte datagrams), with IPv4 and IPv6 pings."""
    server = lab.popen("receiver", "iperf3", "-s", "-p", 5201, "-1", stdout=subprocess.DEVNULL)
    while ":5201 " not in lab.run("receiver", "ss", "-Hltn").stdout:
        time.sleep(0.05)
    with lab.capture("receiver", "eth0", out, pcapng=True) as cap:
        client = lab.popen("sender", "iperf3", "-c", lab.address("receiver"), "-p", 5201, "-u",
                           "-b", "1M", "-l", 1000, "-t", 2, stdout=subprocess.DEVNULL)
        lab.run("sender", "ping", "-c", 5, "-i", 0.2, lab.address("receiver"))
        lab.run("sender", "ping", "-6", "-c", 5, "-i", 0.2, lab.address("receiver", 6))
        if client.wait(30) != 0 or server.wait(30) != 0:
            raise RuntimeError("iperf3 UDP failed")
    print(f"{out}: {cap.stats.captured} packets")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent,
                        help="directory to write the captures to (default: captures/)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with Lab.sender_router_receiver() as lab:
        tcp_2streams(lab, args.out / "tcp_2streams.pcap")
        udp_ping(lab, args.out / "udp_ping.pcapng")
    return 0


if __name__ == "__main__":
    sys.exit(main())
