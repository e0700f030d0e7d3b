"""The analyses, one module (or package) each, and where each public name lives.

Nothing here is imported until it is asked for: ``import pcapstats`` and every CLI command
load only the analyses they use (importing all of them took 45 ms of each command's start-up).
:data:`PUBLIC` maps every name the package exports from an analysis to its module (and the
study layer's ``compare``, which builds on them, to its full module name);
:func:`load_all` imports them all (``pcapstats columns`` lists every analysis' tables).
"""

from __future__ import annotations

import importlib

PUBLIC: dict[str, str] = {
    **dict.fromkeys(("throughput", "Throughput"), "throughput"),
    **dict.fromkeys(("iograph", "IOGraph"), "iograph"),
    **dict.fromkeys(("tcp_analysis", "TcpAnalysis"), "tcp_analysis"),
    **dict.fromkeys(("retrans", "Retrans"), "retrans"),
    **dict.fromkeys(("rtt", "Rtt"), "rtt"),
    **dict.fromkeys(("seqgraph", "SeqGraph"), "seqgraph"),
    **dict.fromkeys(("cwnd", "Cwnd", "wscale"), "cwnd"),
    **dict.fromkeys(("flavour", "Flavour"), "flavour"),
    **dict.fromkeys(("limits", "Limits"), "limits"),
    **dict.fromkeys(("verify", "Verification", "Expected"), "verify"),
    "reassemble": "reassembly",
    **dict.fromkeys(("ping", "Ping"), "ping"),
    **dict.fromkeys(("udp", "Udp"), "udp"),
    **dict.fromkeys(("fairness", "Fairness"), "fairness"),
    **dict.fromkeys(("delay", "Delay"), "delay"),
    **dict.fromkeys(("wifi", "Wifi"), "wifi"),
    **dict.fromkeys(("hierarchy", "Hierarchy"), "hierarchy"),
    # a study's comparison builds on every analysis (pcapstats.study, the layer above)
    **dict.fromkeys(("compare", "Compare"), "pcapstats.study.compare"),
    "report": "pcapstats.study.report",
    "columns": "pcapstats.analyses",                   # this module's own, below
}


def _module(where: str) -> str:
    """A PUBLIC value as a module name: an analysis here, or a full name (pcapstats.study)."""
    return where if "." in where else f"{__name__}.{where}"


def public(name: str):
    """The exported object ``name`` (an analysis function or result class), its module
    imported on first use."""
    module = importlib.import_module(_module(PUBLIC[name]))
    return getattr(module, name)


def load_all() -> None:
    """Import every analysis module (so that results.RESULT_TYPES knows them all)."""
    for module in dict.fromkeys(PUBLIC.values()):
        importlib.import_module(_module(module))


def columns(which: str | None = None):
    """``pcapstats columns`` in a notebook, as a DataFrame: every column of ``which``'s tables
    (an analysis, ``"packets"``, None: all) with its type, unit, meaning and Wireshark field;
    or, for ``"metrics"`` or a metric's name, each metric's heading, unit and definition."""
    from ..results import described  # lazy: numpy, which `import pcapstats` does not load
    load_all()
    return described(which)
