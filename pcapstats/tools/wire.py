"""What the traffic tools put on the wire, defined once: the tool sends it, verify checks it.

A module of its own (not simpleperf.py) so that importing pcapstats does not import the tool:
``python -m pcapstats.tools.simpleperf`` would then warn that the module was already loaded.
"""

SIMPLEPERF_PORT = 8088                 # the server's default port
SIMPLEPERF_MESSAGE_BYTES = 1000
SIMPLEPERF_MESSAGE = b"0" * SIMPLEPERF_MESSAGE_BYTES  # can never contain BYE
SIMPLEPERF_BYE = b"BYE"                # the client's last bytes
SIMPLEPERF_ACK = b"ACK: BYE"           # the server's whole answer
