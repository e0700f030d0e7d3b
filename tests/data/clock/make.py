"""Make the stepped captures of this folder from the shipped captures (run from the repository:
``python3 tests/data/clock/make.py``).

Each is a shipped capture with the clock stepped at one packet, as NTP stepping the capturing
host's clock mid-capture does: that packet's record and every later one moved by the step
(``tests.helpers.mutate.step_from``), the packets and their order unchanged, gzipped.  The name
says the step: ``NAME.step-5s-at131.pcap.gz`` is ``captures/NAME.pcap`` with every packet from
the 131st on 5 s earlier; ``+1h`` an hour later.  tests/analyses/test_clock.py undoes the step
to get the unstepped capture back, so it needs only these files.
"""

import gzip
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from tests.helpers.mutate import step_from  # noqa: E402

STEPS = {"s": 1, "h": 3600}
MADE = {   # capture: (packet, steps)
    # a ping size sweep at the requester: packet 131 is the last fragment of a 4000-byte
    # echo request (its reply comes after the step)
    "ping-sweep-sender": (131, ("-5s", "+5s", "-1h", "+1h")),
    # iperf3 UDP at 15 Mbit/s through 10 Mbit/s, at the receiver (34.9 % lost): mid-test
    "iperf3-udp-15mbit-via-10mbit.receiver": (2000, ("-5s", "+5s", "-1h", "+1h")),
    # simpleperf reno at 1 % loss, at the sender, mid-transfer: packet 188 is a re-send
    # Wireshark calls out-of-order (after a step back, tshark calls it a retransmission)
    "sp-reno-loss1pct": (188, ("-5s", "+1h")),
}


def seconds(step: str) -> int:
    return int(step[:-1]) * STEPS[step[-1]]


def main() -> None:
    here = Path(__file__).parent
    for name, (packet, steps) in MADE.items():
        data = (ROOT / "captures" / f"{name}.pcap").read_bytes()
        for step in steps:
            out = here / f"{name}.step{step}-at{packet}.pcap.gz"
            out.write_bytes(gzip.compress(step_from(data, packet, seconds(step)), 9, mtime=0))
            print(out.relative_to(ROOT))


if __name__ == "__main__":
    main()
