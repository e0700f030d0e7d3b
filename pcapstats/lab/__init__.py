"""The lab: make real captures in network namespaces (hosts, veth links, traffic, tcpdump).

Only this package touches the host's network, and it undoes everything it made.

    from pcapstats.lab import Scenario, run, load_sidecar
    doc = run(Scenario(tool="simpleperf", loss="10%", delay="20ms", rate="30mbit", cc="reno",
                       duration_s=10), "runs/reno10.pcap")   # writes runs/reno10.pcap + .json
    load_sidecar("runs/reno10.json")["flows"][0]["tcp_info"]["snd_cwnd"]

Modules, bottom up: commands (running tools, LabError), cleanup (exit paths, leftovers),
tcpdump, netns (the Lab: hosts, links), topologies (ready-made labs), impair (loss, delay, rate:
on a lab's bottleneck or a host's own interface, with netem or the fallback), traffic (starting
the tools), sidecar (writing the JSON beside each capture), accuracy (achieved against asked),
run (one scenario), specfile (reading the lab's TOML files), network (a topology file),
network_run (one run of it), matrix (a grid of scenarios), live (``pcapstats capture`` on a host's own
interface).  The programs that run inside the hosts are in pcapstats.tools; the sidecar's
format and reading side in pcapstats.sidecar.
"""

from pcapstats.lab.impair import Applied, Impairment, apply
from pcapstats.lab.matrix import load_spec, run_matrix
from pcapstats.lab.cleanup import PREFIX, cleanup_leftovers
from pcapstats.lab.commands import LabError
from pcapstats.lab.netns import Bottleneck, Interface, Lab
from pcapstats.lab.tcpdump import CaptureStats, TcpdumpCapture
from pcapstats.lab.topologies import chain, dumbbell, sender_router_receiver, two_hosts
from pcapstats.lab.cleanup import RunInterrupted
from pcapstats.lab.run import Scenario, check_host, run
from pcapstats.sidecar import SCHEMA as SIDECAR_SCHEMA, SidecarError, load_sidecar, sidecar_for

__all__ = ["PREFIX", "Applied", "Bottleneck", "CaptureStats", "Impairment", "Interface", "Lab",
           "LabError", "RunInterrupted", "SIDECAR_SCHEMA", "Scenario", "SidecarError",
           "TcpdumpCapture", "apply", "check_host", "cleanup_leftovers", "load_sidecar",
           "load_spec", "run", "run_matrix", "sidecar_for", "two_hosts",
           "sender_router_receiver", "chain", "dumbbell"]
