"""pcapstats: Wireshark's numbers for captures of network transfers, from a script, fast.

    import pcapstats as ps
    ps.throughput("capture.pcap")      # one row per TCP/UDP stream, as Statistics > Conversations
    ps.iograph("capture.pcap", interval=0.1)  # I/O graph + averages; .figure() draws it
    ps.cwnd("capture.pcap", stream=0)  # cwnd estimate, loss episodes; ps.rtt, ps.seqgraph, ps.retrans
    ps.flavour("capture.pcap")         # cubic | reno | bbr | unknown per stream, with evidence
    ps.verify("capture.pcap")          # simpleperf / iperf3 / ping exchange followed? with frames
    ps.tcp_analysis(cap)               # per TCP packet: tshark's tcp.analysis.* fields
    cap = ps.read("capture.pcap")      # the packet table (cap.packets), read once for many analyses

Every analysis takes a Capture, a path, or a list of either, and returns a Result (tables,
``.to_pandas()``, ``.figure()``, shown with its figure in a notebook); ``ps.each`` runs one
over many captures, ``ps.concat`` puts results together.  Everything public is re-exported here
once; ``__all__`` is the API.
"""

from ._version import __version__
from .analyses.cwnd import Cwnd, cwnd
from .analyses.delay import Delay, delay
from .analyses.fairness import Fairness, fairness
from .analyses.flavour import Flavour, flavour
from .analyses.iograph import IOGraph, iograph
from .analyses.ping import Ping, ping
from .analyses.reassembly import reassemble
from .analyses.retrans import Retrans, retrans
from .analyses.rtt import Rtt, rtt
from .analyses.seqgraph import SeqGraph, seqgraph
from .analyses.tcp_analysis import TcpAnalysis, tcp_analysis
from .analyses.throughput import Throughput, throughput
from .analyses.udp import Udp, udp
from .analyses.verify import Expected, Verification, verify
from .batch import Outcome, each
from .capture import Capture
from .errors import (CaptureFormatError, CaptureOpenError, ClockWarning, CorruptCaptureError,
                     EngineError, PcapstatsError, PcapstatsWarning, SkippedPacketsWarning,
                     TruncatedCaptureWarning, UsageError)
from .reader import read
from .results import Result, concat

__all__ = [
    # reading, and many captures at once
    "read", "Capture", "each", "concat", "Outcome", "Result",
    # the analyses and their results
    "throughput", "Throughput", "iograph", "IOGraph", "tcp_analysis", "TcpAnalysis",
    "retrans", "Retrans", "rtt", "Rtt", "seqgraph", "SeqGraph", "cwnd", "Cwnd",
    "flavour", "Flavour", "verify", "Verification", "Expected", "reassemble", "ping", "Ping",
    "udp", "Udp", "fairness", "Fairness", "delay", "Delay",
    # errors and warnings
    "PcapstatsError", "CaptureOpenError", "CaptureFormatError", "CorruptCaptureError",
    "EngineError", "UsageError", "PcapstatsWarning", "TruncatedCaptureWarning",
    "SkippedPacketsWarning", "ClockWarning",
    "__version__",
]
