"""The contract of the TCP sequence analyser: its flag word and its input and output arrays.

Two implementations honour it -- the compiled ``_tcpseq.c`` (kernel_c.py) and the plain-Python
twin (kernel_python.py, the same answers slowly: about 1 s per 100k packets) -- kernel.py
picks one, and pcapstats.analyses.tcp_analysis says what the outputs mean.  The logic is
Wireshark 4.0's tcp_analyze_sequence_number, sequential per stream and direction.

Both are an ``Analyser``: ``feed(inputs, out, whole)`` analyses the next packets in frame
order, each stream's state carried from the feeds before (so a file can be fed a window at a
time, as its reader walks it); ``whole``: these are all the packets there will be (a stream's
state is let go after its last one).  ``counts()`` gives the per-stream-and-direction COUNTS
of every packet fed so far.  ``tsval``/``tsecr``/``has_ts`` are optional inputs: without
them ``ts_rtt``/``ts_ok`` are not computed (and may be left out of ``out``).
"""

from __future__ import annotations

import numpy as np

# Bits of the compiled and Python analysers' flag word (the F_* of _tcpseq.c).
FLAG_BITS = {
    "generic_retransmission": 0x0001, "fast_retransmission": 0x0002,
    "spurious_retransmission": 0x0004, "out_of_order": 0x0008, "lost_segment": 0x0010,
    "ack_lost_segment": 0x0020, "duplicate_ack": 0x0040, "zero_window": 0x0080,
    "zero_window_probe": 0x0100, "zero_window_probe_ack": 0x0200, "window_full": 0x0400,
    "keep_alive": 0x0800, "keep_alive_ack": 0x1000, "window_update": 0x2000,
    "reused_ports": 0x4000,
}
ANALYSED = 0x8000   # Wireshark made its per-packet analysis record (then iRTT is shown)
RETRANSMISSIONS = 0x0007
# (name, dtype) of the analyser's outputs, in the order of tcpseq_args in _tcpseq.c.
OUTPUTS = (("rel_seq", np.uint32), ("rel_ack", np.uint32), ("nxtseq", np.uint32),
            ("window_size", np.uint32), ("scalefactor", np.int32), ("aflags", np.uint32),
            ("dupack_num", np.uint32), ("dupack_frame", np.uint32), ("acks_frame", np.uint32),
            ("bytes_in_flight", np.uint32), ("push_bytes", np.uint32), ("ack_rtt", np.int64),
            ("rto", np.int64), ("initial_rtt", np.int64), ("rto_frame", np.uint32),
            ("karn", np.uint8), ("resent", np.uint8), ("ts_rtt", np.int64), ("ts_ok", np.uint8))
TIMESTAMP_OUTPUTS = ("ts_rtt", "ts_ok")
# (name, dtype) of its inputs, after n and whole.
INPUTS = (("stream", np.int64), ("dir", np.uint8), ("analysed", np.uint8), ("flags", np.uint16),
           ("seq", np.uint32), ("ack", np.uint32), ("win", np.uint16), ("seglen", np.uint32),
           ("t", np.int64), ("frame", np.uint32), ("wscale", np.int16), ("sack_count", np.uint8),
           ("sack_le", np.uint32), ("sack_re", np.uint32), ("tsval", np.uint32),
           ("tsecr", np.uint32), ("has_ts", np.uint8))
TIMESTAMP_INPUTS = ("tsval", "tsecr", "has_ts")
# What ``counts()`` gives per stream and direction, after the stream and the direction (0/1),
# in the order of _tcpseq.c's count(): packets, payload bytes, re-sent segments, then tshark's
# flags: retransmission (any of the RETRANSMISSIONS bits), then each FLAG_BITS bit from 0x0002
FLAG_COUNTS = ("retransmission", *(name for name, bit in sorted(FLAG_BITS.items(),
                                                                 key=lambda kv: kv[1])
                                   if bit > 1))
COUNTS = ("packets", "payload_bytes", "resent", *FLAG_COUNTS)
