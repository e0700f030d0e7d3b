"""Names of the link types (LINKTYPE_* values of pcap and pcapng) for messages and tables."""

DECODED = {
    0: "BSD null/loopback",
    1: "Ethernet",
    12: "raw IP (OpenBSD DLT_RAW)",
    14: "raw IP (BSD DLT_RAW)",
    101: "raw IP",
    105: "IEEE 802.11",
    108: "OpenBSD loopback",
    127: "IEEE 802.11 radiotap",
    113: "Linux cooked (SLL)",
    228: "raw IPv4",
    229: "raw IPv6",
    276: "Linux cooked v2 (SLL2)",
}
OTHER = {
    147: "user-defined 0",
    189: "Linux USB",
    192: "PPI",
    195: "IEEE 802.15.4",
    220: "Linux USB (mmapped)",
    249: "Linux netlink",
    9: "PPP",
    50: "PPP in HDLC framing",
    104: "Cisco HDLC",
}


def linktype_name(linktype: int) -> str:
    return DECODED.get(linktype) or OTHER.get(linktype) or "unknown to pcapstats"
