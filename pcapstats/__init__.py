"""pcapstats: Wireshark's numbers for captures of network transfers, from a script, fast.

    import pcapstats as ps
    ps.throughput("capture.pcap")      # one row per TCP/UDP stream, as Statistics > Conversations
    ps.iograph("capture.pcap", interval=0.1)  # I/O graph + averages; .figure() draws it
    ps.cwnd("capture.pcap", stream=0)  # cwnd estimate, loss episodes; ps.rtt, ps.seqgraph, ps.retrans
    ps.flavour("capture.pcap")         # cubic | reno | bbr | unknown per stream, with evidence
    ps.verify("capture.pcap")          # simpleperf / iperf3 / ping exchange followed? with frames
    ps.tcp_analysis(cap)               # per TCP packet: tshark's tcp.analysis.* fields
    ps.hierarchy("capture.pcap")       # packets and bytes per protocol, as Protocol Hierarchy
    ps.compare(files, by="cc,loss")    # a study: captures side by side, trials aggregated
    cap = ps.read("capture.pcap")      # the packet table (cap.packets), read once for many analyses

Every analysis takes a Capture, a path, or a list of either, and returns a Result (tables,
``.to_pandas()``, ``.figure()``, shown with its figure in a notebook); ``ps.each`` runs one
over many captures, ``ps.concat`` puts results together.  Everything public is re-exported here
once; ``__all__`` is the API.  The analyses (pcapstats.analyses.PUBLIC) and the reading API
(``_CORE``) are imported when first used, so ``import pcapstats`` and each command load only
what they need.
"""

import importlib

from ._version import __version__
from .analyses import PUBLIC as _ANALYSES, public as _public
from .errors import (CaptureFormatError, CaptureOpenError, ClockWarning, CorruptCaptureError,
                     EngineError, NothingToReport, PcapstatsError, PcapstatsWarning,
                     SkippedPacketsWarning, TruncatedCaptureWarning, UsageError)

# The reading API and the result's, by the module each lives in, imported on first use like
# the analyses: they load numpy (~80 ms), which `pcapstats --help`, the lab's commands and the
# tools a lab host runs (python3 -m pcapstats.tools.X imports this package first) never use.
_CORE = {"read": "reader", "Capture": "capture", "each": "batch", "Outcome": "batch",
         "Result": "results", "concat": "results"}

__all__ = [
    # reading, and many captures at once
    "read", "Capture", "each", "concat", "Outcome", "Result",
    # the analyses and their results
    "throughput", "Throughput", "iograph", "IOGraph", "tcp_analysis", "TcpAnalysis",
    "retrans", "Retrans", "rtt", "Rtt", "seqgraph", "SeqGraph", "cwnd", "Cwnd", "wscale",
    "flavour", "Flavour", "limits", "Limits", "verify", "Verification", "Expected",
    "reassemble", "ping", "Ping",
    "udp", "Udp", "fairness", "Fairness", "delay", "Delay", "wifi", "Wifi",
    "hierarchy", "Hierarchy",
    # studies: many captures side by side, by their labels
    "compare", "Compare", "report",
    # what every column and metric means (`pcapstats columns`)
    "columns",
    # errors and warnings
    "PcapstatsError", "CaptureOpenError", "CaptureFormatError", "CorruptCaptureError",
    "EngineError", "UsageError", "NothingToReport", "PcapstatsWarning", "TruncatedCaptureWarning",
    "SkippedPacketsWarning", "ClockWarning",
    "__version__",
]


def __getattr__(name: str):
    """An analysis or its result class, or the reading API, imported on first use (PEP 562)."""
    if name in _ANALYSES:
        value = globals()[name] = _public(name)
        return value
    if name in _CORE:
        value = globals()[name] = getattr(importlib.import_module(f".{_CORE[name]}", __name__),
                                          name)
        return value
    raise AttributeError(f"module 'pcapstats' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The API (``__all__``) and the module's own dunders: every name listed can be got, in a
    fresh interpreter as after any import (submodules such as ``study`` appear in
    ``globals()`` only once something imported them, so they are not listed)."""
    own = [n for n in globals() if n.startswith("__") and n.endswith("__")]
    return sorted(set(__all__) | set(own))
