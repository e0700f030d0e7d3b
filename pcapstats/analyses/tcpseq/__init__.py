"""The TCP base: Wireshark 4.0's sequence analysis of every TCP packet, which the TCP analyses
(``tcp_analysis``, ``retrans``, ``rtt``, ``cwnd``, ``flavour``, ``fairness``, ...) build on.

- ``contract``: the analyser's flag word and its input and output arrays; two implementations
  honour it, ``kernel_c`` (the compiled ``_tcpseq.c``, through ctypes) and ``kernel_python``
  (the plain-Python twin: the same answers, slowly); ``kernel`` picks one and runs it;
- ``inputs``: what a per-stream TCP analysis reads (``STREAM_NEEDS``) and the analyser's inputs
  made from a table;
- ``columns``: the per-packet columns made from its outputs (``packet_analysis``);
- ``windows``: the analysis of a file a window at a time (``AnalysedWindows``, a keeper);
- ``resent``: the ``resent`` column alone, without the analyser.

What the columns mean is ``pcapstats.analyses.tcp_analysis``' docstring.  This module only
re-exports.
"""

from .columns import FLAG_COLUMNS, analysed, keep_as_runs, packet_analysis, runs
from .contract import (ANALYSED, COUNTS, FLAG_BITS, FLAG_COUNTS, INPUTS, OUTPUTS,
                       RETRANSMISSIONS, TIMESTAMP_INPUTS, TIMESTAMP_OUTPUTS)
from .inputs import (STREAM_NEEDS, STREAM_READS, analysed_rows, analysis_inputs, table_index,
                     tcp_rows)
from .kernel import new_analyser, run_analyser
from .resent import RESENT_READS, resent_packets, resent_rows, resent_segments
from .windows import AnalysedWindows

__all__ = ["ANALYSED", "COUNTS", "FLAG_BITS", "FLAG_COLUMNS", "FLAG_COUNTS", "INPUTS", "OUTPUTS",
           "RESENT_READS", "RETRANSMISSIONS", "STREAM_NEEDS", "STREAM_READS", "TIMESTAMP_INPUTS",
           "TIMESTAMP_OUTPUTS", "AnalysedWindows", "analysed", "analysed_rows", "analysis_inputs",
           "keep_as_runs", "new_analyser", "packet_analysis", "resent_packets", "resent_rows",
           "resent_segments", "run_analyser", "runs", "table_index", "tcp_rows"]
