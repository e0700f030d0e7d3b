"""Programs that run inside lab hosts, and what they put on the wire.

Each module here runs on its own (``python3 -m pcapstats.tools.simpleperf``, ``...filexfer``,
``...delayline``, ``...pingpong``) inside a network namespace, so it imports only the standard
library and the bottom of pcapstats (``errors``, ``units``) and its neighbours here: a copy of
the module alone runs anywhere.  (``python3 -m`` still imports the ``pcapstats`` package first,
about 0.2 s with numpy: the lab starts clients through a launcher that imports it before the
common start instant, see :mod:`pcapstats.lab.traffic`.)

- :mod:`.simpleperf`: the course's iperf-like TCP tool (1000-byte messages, ``BYE`` /
  ``ACK: BYE``), with the sender kernel's TCP_INFO sampled into its report;
- :mod:`.pingpong`: request/answer latency per message size over TCP or UDP, one message in
  flight (the delay model's ping-pong), with its own report;
- :mod:`.filexfer`: a TCP/UDP file transfer whose receiver checks a SHA-256;
- :mod:`.delayline`: the NFQUEUE delay line the lab uses where the kernel has no netem;
- :mod:`.tcpinfo`: ``struct tcp_info`` of this kernel, decoded, and a sampler thread;
- :mod:`.wire`: the bytes simpleperf sends, defined once (verify checks them);
- :mod:`.args`: the command-line pieces the tools share (one-line errors, port, address, cc).
"""
