"""pcapstats: Wireshark's numbers for captures of network transfers, from a script, fast.

    import pcapstats as ps
    cap = ps.read("capture.pcap")
    ps.throughput(cap)          # one row per TCP/UDP stream, as Statistics > Conversations
    ps.throughput_file("big.pcap")  # the same in one streaming pass, memory bounded by a window
    ps.iograph(cap, interval=0.1)  # I/O graph series + averages (capture span, active, per transfer)
    ps.tcp_analysis(cap)        # per TCP packet: tshark's tcp.analysis.* flags, bytes in flight, RTT
    ps.verify(cap)              # simpleperf / iperf3 / ping exchange followed? pass/fail + evidence
    ps.flavour(cap)             # cubic | reno | bbr | unknown per stream, with confidence and evidence
    ps.cwnd(cap, stream=0)      # cwnd estimate, limited intervals; ps.retrans, ps.rtt, ps.seqgraph

Everything public is re-exported here once; ``__all__`` is the API (tests/test_api.py holds it).
"""

from .analyses.cwnd import cwnd, cwnd_analysis
from .analyses.flavour import FLAVOUR_COLUMNS, flavour
from .analyses.iograph import IOGraph, iograph, iograph_many
from .analyses.reassembly import reassemble
from .analyses.retrans import retrans
from .analyses.rtt import rtt, rtt_summary
from .analyses.seqgraph import seqgraph
from .analyses.tcp_analysis import TCP_ANALYSIS_COLUMNS, tcp_analysis, tcp_analysis_columns
from .analyses.throughput import THROUGHPUT_COLUMNS, throughput, throughput_file
from .analyses.verify import Expected, Verification, verify
from .capture import Capture
from .errors import (CaptureFormatError, CaptureOpenError, CorruptCaptureError, EngineError,
                     PcapstatsError, PcapstatsWarning, SkippedPacketsWarning,
                     TruncatedCaptureWarning, UsageError)
from .reader import read

__version__ = "0.1.0"

__all__ = [
    "Capture", "read", "throughput", "throughput_file", "THROUGHPUT_COLUMNS",
    "tcp_analysis", "tcp_analysis_columns", "TCP_ANALYSIS_COLUMNS",
    "iograph", "iograph_many", "IOGraph",
    "cwnd", "cwnd_analysis", "retrans", "rtt", "rtt_summary", "seqgraph",
    "verify", "Verification", "Expected", "reassemble",
    "flavour", "FLAVOUR_COLUMNS",
    "PcapstatsError", "CaptureOpenError", "CaptureFormatError", "CorruptCaptureError",
    "EngineError", "UsageError", "PcapstatsWarning", "TruncatedCaptureWarning",
    "SkippedPacketsWarning", "__version__",
]
