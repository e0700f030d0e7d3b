"""Reference counts from tcptrace (Ostermann's, Debian's 6.6.7): ``tcptrace -n -l -r --csv``.

One row per TCP connection tcptrace traces, keyed by its 4-tuple (host a, port a, host b,
port b: a is the side that sent the connection's first packet); a connection whose ports are
used again after it ended is several tcptrace connections and one tcp.stream, so the rows of
one 4-tuple are added up (``Direction``).  tcptrace prints RTTs in ms to 0.1 ms.
"""

from __future__ import annotations

import csv
import functools
import io
import subprocess
from dataclasses import dataclass, field


@dataclass
class Direction:
    """What tcptrace says of one direction of one 4-tuple (its connections added up)."""
    packets: int = 0              # total_packets
    rexmt: int = 0                # rexmt_data_pkts: data segments whose bytes it saw before
    out_of_order: int = 0         # outoforder_pkts: below the highest sequence, never seen
    rtt_samples: int = 0          # RTT_samples: ACKs of this direction's data, Karn's rule
    rtt_min_ms: float | None = None
    rtt_max_ms: float | None = None
    rtt_avgs: list = field(default_factory=list)     # (samples, printed avg ms) a connection


@functools.lru_cache(maxsize=None)
def tcptrace_directions(path) -> dict[tuple, Direction]:
    """(host a, port a, host b, port b, "a2b" | "b2a") -> Direction, for every connection."""
    out = subprocess.run(["tcptrace", "-n", "-l", "-r", "--csv", str(path)],
                         capture_output=True, text=True, check=True).stdout
    lines = [line for line in out.splitlines() if line and not line.startswith("#")]
    head = next((i for i, line in enumerate(lines) if line.startswith("conn_#")), None)
    found: dict[tuple, Direction] = {}
    if head is None:
        return found                        # no TCP connection traced
    for row in csv.DictReader(io.StringIO("\n".join(lines[head:]))):
        row = {k.strip(): v.strip() for k, v in row.items() if k}
        tuple4 = (row["host_a"], int(row["port_a"]), row["host_b"], int(row["port_b"]))
        for side in ("a2b", "b2a"):
            d = found.setdefault((*tuple4, side), Direction())
            d.packets += int(row[f"total_packets_{side}"])
            d.rexmt += int(row[f"rexmt_data_pkts_{side}"])
            d.out_of_order += int(row[f"outoforder_pkts_{side}"])
            n = int(row[f"RTT_samples_{side}"])
            if n:
                d.rtt_samples += n
                low, high = float(row[f"RTT_min_{side}"]), float(row[f"RTT_max_{side}"])
                d.rtt_min_ms = low if d.rtt_min_ms is None else min(d.rtt_min_ms, low)
                d.rtt_max_ms = high if d.rtt_max_ms is None else max(d.rtt_max_ms, high)
                d.rtt_avgs.append((n, float(row[f"RTT_avg_{side}"])))
    return found
