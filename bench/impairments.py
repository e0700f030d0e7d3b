"""Impairment benchmark: asked vs measured rate, RTT and loss, and the delay line's cost.

    python bench/impairments.py [--seconds 5] [--markdown]

Needs root (network namespaces).  Builds sender - router - receiver with the lab, then for each
row applies one impairment, measures with the tools' own reports (iperf3 -J received bytes,
ping's per-reply times, the iptables counters against a numbered UDP stream) and removes it.
The 100 Mbit/s x 50 ms row also reports what the NFQUEUE delay line cost: CPU seconds of
both directions' programs over the transfer's wall time (% of one core; system time includes
the kernel forwarding each released packet, and the sender's TCP handling each released ACK,
in the program's verdict call), the most packets it held, and the kernel's drop counters.
A jitter row compares ping's mdev with the spread asked.  Printed, never asserted: see
tests/lab/test_impair.py for the checks.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.helpers.labtools import (expected_goodput_bps, iperf3_tcp, ping,  # noqa: E402
                                    received_goodput_bps, udp_sequence)

from pcapstats.lab import topologies  # noqa: E402
from pcapstats.lab.impair import Impairment, apply  # noqa: E402


def rate_row(lab, rate_bps, seconds, delay_s=0.0):
    with apply(lab, None, Impairment(rate_bps=rate_bps, delay_s=delay_s)) as applied:
        report = iperf3_tcp(lab, seconds=seconds)
        got, want = received_goodput_bps(report), expected_goodput_bps(report, rate_bps)
        row = {"asked": f"rate {rate_bps / 1e6:g} Mbit/s" + (
            f", RTT {2 * delay_s * 1e3:g} ms" if delay_s else ""),
            "expected": f"{want / 1e6:.3f} Mbit/s goodput",
            "measured": f"{got / 1e6:.3f} Mbit/s", "error": f"{got / want - 1:+.1%}",
            "mechanisms": ", ".join(f"{k}={v}" for k, v in applied.mechanisms.items())}
        final = applied.remove()
    if delay_s:
        cpu = sum(c.program["cpu_s"] for c in final.delay.values())
        user = sum(c.program["cpu_user_s"] for c in final.delay.values())
        wall = report["end"]["sum_received"]["seconds"] + 1  # + the omitted second
        held = max(c.program["held_max"] for c in final.delay.values())
        drops = sum(c.kernel["queue_dropped"] + c.kernel["user_dropped"]
                    for c in final.delay.values())
        late = max(c.program["late_us_mean"] for c in final.delay.values())
        row["delay line"] = (f"cpu {cpu / wall:.0%} of a core, {user / wall:.0%} in user space "
                             f"(both directions, {cpu:.2f} s over ~{wall:.1f} s; the system "
                             "part includes forwarding the released packets), "
                             f"held max {held}, kernel drops "
                             f"{drops}, mean lateness {late:.0f} us")
    return row


def delay_row(lab, rtt_ms, base_ms):
    with apply(lab, None, Impairment(delay_s=rtt_ms / 2e3)) as applied:
        report = ping(lab, 50, 0.02 if rtt_ms < 50 else 0.05)
        final = applied.remove()
    med, avg = statistics.median(report.rtts_ms), report.avg_ms
    late = max(c.program["late_us_mean"] for c in final.delay.values())
    return {"asked": f"RTT {rtt_ms} ms (one-way {rtt_ms / 2:g} ms each way)",
            "expected": f"{rtt_ms} ms",
            "measured": f"ping median {med:g} ms, avg {avg:.3f} ms (n={len(report.rtts_ms)})",
            "error": f"{avg / rtt_ms - 1:+.1%}",
            "mechanisms": f"added over asked + base RTT: {avg - rtt_ms - base_ms:.3f} ms; "
                          f"delay line lateness mean {late:.0f} us a pass"}


def jitter_row(lab, delay_ms=20, jitter_ms=5):
    """Uniform +-J each way: RTT std J*sqrt(2/3) (two independent uniforms), ping's mdev."""
    with apply(lab, None, Impairment(delay_s=delay_ms / 1e3, jitter_s=jitter_ms / 1e3)):
        report = ping(lab, 200, 0.011)
    want = jitter_ms * (2 / 3) ** 0.5
    return {"asked": f"delay {delay_ms} ms +- {jitter_ms} ms uniform, each way",
            "expected": f"RTT avg {2 * delay_ms} ms, std {want:.2f} ms",
            "measured": f"avg {report.avg_ms:.2f} ms, mdev {report.mdev_ms:.2f} ms, "
                        f"min {report.min_ms:.2f}, max {report.max_ms:.2f} (n=200)",
            "error": f"std {report.mdev_ms / want - 1:+.1%}", "mechanisms": ""}


def loss_row(lab, loss, count=20000):
    with apply(lab, None, Impairment(loss=loss)) as applied:
        seqs = udp_sequence(lab, count, pps=20000)
        c = applied.counters().loss["data"]
    rate = c.dropped_packets / c.offered_packets
    sigma = (loss * (1 - loss) / c.offered_packets) ** 0.5
    return {"asked": f"loss {loss:.0%}", "expected": f"{loss:.2%} +- {sigma:.2%} (1 sigma)",
            "measured": f"{rate:.2%} ({c.dropped_packets}/{c.offered_packets})",
            "error": f"{(rate - loss) / sigma:+.1f} sigma",
            "mechanisms": f"receiver got {len(seqs)} = offered - dropped: "
                          f"{len(seqs) == c.offered_packets - c.dropped_packets}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    rows = []
    with topologies.sender_router_receiver() as lab:
        base = ping(lab, 50, 0.01).avg_ms
        free = received_goodput_bps(iperf3_tcp(lab, seconds=2, omit=0))
        rows.append({"asked": "nothing", "expected": "-",
                     "measured": f"base RTT {base:.3f} ms, TCP {free / 1e6:.0f} Mbit/s",
                     "error": "", "mechanisms": ""})
        for rate in (1e6, 10e6, 100e6):
            rows.append(rate_row(lab, rate, args.seconds))
        rows.append(rate_row(lab, 100e6, args.seconds, delay_s=0.025))
        for rtt in (10, 50, 100):
            rows.append(delay_row(lab, rtt, base))
        rows.append(jitter_row(lab))
        for loss in (0.01, 0.10, 0.30):
            rows.append(loss_row(lab, loss))
    keys = ["asked", "expected", "measured", "error", "mechanisms", "delay line"]
    if args.markdown:
        print("| " + " | ".join(keys) + " |")
        print("|" + "---|" * len(keys))
        for r in rows:
            print("| " + " | ".join(str(r.get(k, "")) for k in keys) + " |")
    else:
        for r in rows:
            print("  ".join(f"{k}: {r[k]}" for k in keys if r.get(k)))


if __name__ == "__main__":
    main()
