"""The streams layer: which stream each packet belongs to, its direction, and per-stream facts.

Everything the analyses ask about streams is answered here, once, a module a job:

- **numbering** (``numbering``: :class:`TcpStreams`, :func:`udp_streams`): stream indices
  exactly as Wireshark numbers ``tcp.stream`` and ``udp.stream``;
- **own transport header** and **direction** (``direction``: :func:`own_transport`,
  :func:`packet_directions`): side A of a stream is the source of its first packet with its
  own header (not one quoted inside an ICMP error);
- **IP fragments** (``fragments``: :func:`whole_datagrams`): the whole datagram a first
  fragment stands for;
- **the per-stream summary** (``summary``: :func:`stream_summary`, fed by
  :class:`StreamTotals`; :class:`SummaryKeeper` window by window): endpoints, packets, frame
  and payload bytes each way, first and last packet, the busiest interval each way -- what
  ``pcapstats throughput`` shows, stream choice reads and the lab's sidecar looks stream ids
  up in;
- **names** (``names``: :func:`stream_names`, :func:`id_ranges`): a stream as a figure names
  it, with what the lab's sidecar says ran on it;
- **stream choice** (``choice``: :func:`choose_stream`): the stream a per-stream analysis was
  asked for, checked, or the TCP stream with the most payload.

The functions here read a capture through ``cap.column`` / ``cap.layer`` only, so this package
sits below :mod:`pcapstats.capture`, which derives its ``direction`` column from it.  This module
only re-exports.
"""

from .choice import StreamChoice, choose_stream, require_tcp
from .direction import DIRECTIONS, PROTOS, own_transport, packet_directions
from .fragments import REASSEMBLY_NS, whole_datagrams
from .names import id_ranges, stream_names
from .numbering import ACK, SYN, TcpStreams, first_occurrences, tcp_streams, udp_streams
from .summary import (STREAM_SUMMARY_COLUMNS, SummaryKeeper, StreamTotals, TimeWentBack,
                      empty_summary, stack_summaries, stream_summary)

__all__ = ["ACK", "DIRECTIONS", "PROTOS", "REASSEMBLY_NS", "STREAM_SUMMARY_COLUMNS", "SYN",
           "StreamChoice", "StreamTotals", "SummaryKeeper", "TcpStreams", "TimeWentBack",
           "choose_stream", "empty_summary", "first_occurrences", "id_ranges", "own_transport",
           "packet_directions", "require_tcp", "stack_summaries", "stream_names",
           "stream_summary", "tcp_streams", "udp_streams", "whole_datagrams"]
