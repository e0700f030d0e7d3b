"""Where the tests find the repository's files (so no test counts parent directories)."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]   # the repository
CAPTURES = ROOT / "captures"                  # the shipped lab captures and their sidecars
DATA = ROOT / "tests" / "data"                # public captures used by the tests

# The public captures in DATA and tcp.analysis flags tshark finds in each (tests check both).
PUBLIC = {
    "tcp_dupack.pcapng": {"fast_retransmission", "duplicate_ack"},
    "tcp_retransmissions.pcapng": {"retransmission"},
    "tcp_zerowindowdead.pcapng": {"zero_window", "keep_alive"},
    "tcp_zerowindowrecovery.pcapng": {"zero_window", "window_update"},
    "sessionhijacking.pcapng": {"retransmission", "keep_alive", "keep_alive_ack"},
    "dns_isp_hijack.pcapng": {"spurious_retransmission", "out_of_order", "duplicate_ack"},
    "inconsistent_printer.pcapng": {"window_full", "retransmission"},
    "of13_ericsson.pcapng": {"lost_segment", "ack_lost_segment"},
    "ssh.pcap": {"retransmission", "duplicate_ack"},
    "pptp.pcap": {"retransmission", "duplicate_ack"},
}
