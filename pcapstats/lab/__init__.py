"""The lab: make real captures in network namespaces (hosts, veth links, traffic, tcpdump).

Only this package touches the host's network, and it undoes everything it made.

    from pcapstats.lab import Scenario, run, load_sidecar
    doc = run(Scenario(tool="simpleperf", loss="10%", delay="20ms", rate="30mbit", cc="reno",
                       duration_s=10), "runs/reno10.pcap")   # writes runs/reno10.pcap + .json
    load_sidecar("runs/reno10.json")["flows"][0]["tcp_info"]["snd_cwnd"]

Modules: netns (hosts, links, tcpdump), impair (loss, delay, rate on the bottleneck),
delayline (NFQUEUE delay line), tcpinfo (TCP_INFO), traffic (the tools), run (one scenario),
matrix (a grid of scenarios), sidecar (the JSON beside each capture), filexfer (plain file
transfers).
"""

from pcapstats.lab.impair import Applied, Impairment, apply, parse_loss, parse_rate, parse_time
from pcapstats.lab.matrix import load_spec, run_matrix
from pcapstats.lab.netns import (PREFIX, Bottleneck, CaptureStats, Interface, Lab, LabError,
                                 TcpdumpCapture, cleanup_leftovers)
from pcapstats.lab.run import RunInterrupted, Scenario, check_host, run
from pcapstats.lab.sidecar import (SCHEMA as SIDECAR_SCHEMA, SidecarError, load_sidecar,
                                   sidecar_for)

__all__ = ["PREFIX", "Applied", "Bottleneck", "CaptureStats", "Impairment", "Interface", "Lab",
           "LabError", "RunInterrupted", "SIDECAR_SCHEMA", "Scenario", "SidecarError",
           "TcpdumpCapture", "apply", "check_host", "cleanup_leftovers", "load_sidecar",
           "load_spec", "parse_loss", "parse_rate", "parse_time", "run", "run_matrix",
           "sidecar_for"]
