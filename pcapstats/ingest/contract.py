"""The contract between the reader and its two kernels: the interface, its constants and arrays.

``CKernel`` (kernel_c.py) calls the compiled ``_kernel`` extension through ctypes;
``NumpyKernel`` (kernel_numpy.py) does the same in numpy and plain Python, for installs without
a compiler; kernel.py picks one.  Both import this module and nothing of each other.
The reader (ingest/fast.py) drives them window by window over a read-only uint8 array (the
mmap), so that only one window of the file is resident at a time; each call writes into arrays
the reader preallocated (views starting at the window's first packet):

- ``walk_pcap(buf, pos, end, swapped, nsec, max_caplen, rec) -> (n, Status)``: records from
  ``pos``, stopping with ST_TRUNCATED at the first one that does not end before ``end``;
- ``walk_pcapng(buf, end, state, rec, ifs) -> (n, Status)``: the same for blocks; ``state``
  carries section and interface bookkeeping across windows (see _kernel.c);
- ``decode(buf, data_off, caplen, origlen, linktype, out, sack) -> None``: the fields of
  ``DECODE_OUTPUTS`` into ``out`` (plus zeroed 16-byte ``ip_src``/``ip_dst``/``q_src``/``q_dst``
  scratch of the window: the addresses, and those quoted in ICMP errors), SACK
  blocks appended to the compact ``sack`` table;
- ``new_interner()`` / ``new_conversations()``: hashing state across windows, numbered in order
  of first appearance (the comments above ps_intern_addresses in _kernel.c define it).

Walks stop at the first bad record and say why in ``Status``; formats.py turns that into an
exception or a warning.  Nothing here raises on bad input.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass

import numpy as np

# Walk status codes (the enum at the top of _kernel.c).
ST_OK, ST_TRUNCATED, ST_ABSURD_LENGTH, ST_TRAILER_MISMATCH, ST_BAD_BLOCK = 0, 1, 2, 3, 4
ST_UNKNOWN_INTERFACE, ST_TOO_MANY_INTERFACES, ST_BAD_SECTION, ST_CAPACITY = 5, 6, 7, 8
# Per-packet decode status: how far the decode got (the enum above decode_one in _kernel.c).
# DS_MALFORMED: the network header is not what its type says (IPv4: version nibble not 4 or a
# header length under 20; IPv6: version nibble not 6).  DS_END_*: the packet ended inside that
# header or where it should have begun (its captured bytes ran out; for what follows the IP
# header, the IP length): the link type's own header, the 802.11 header, its LLC/SNAP header,
# a VLAN tag, the IP header, what follows a decoded IP header (IPv6 extension headers, TCP, UDP,
# ICMP).
DS_OK, DS_UNKNOWN_LINKTYPE, DS_MALFORMED = 0, 1, 2
DS_END_LINK, DS_END_WLAN, DS_END_LLC, DS_END_TAG, DS_END_IP, DS_END_L4 = 3, 4, 5, 6, 7, 8
# Values of the ``l4`` array.
L4_NONE, L4_ICMP, L4_TCP, L4_UDP = 0, 1, 6, 17
# Bits of ``tcp_opts`` and ``ip_flags``.
OPT_MSS, OPT_WS, OPT_SACK_PERM, OPT_TS = 1, 2, 4, 8
IPF_DF, IPF_MF, IPF_FRAGMENT = 1, 2, 4
# Values of ``wlan_kind``: an 802.11 frame that carries no IP packet, and why (0: not 802.11, or a
# data frame whose LLC/SNAP header was read on, as an Ethernet frame's ethertype is).
WLAN_MGMT, WLAN_CTRL, WLAN_EXTENSION, WLAN_NULL, WLAN_PROTECTED = 1, 2, 3, 4, 5
WLAN_AMSDU, WLAN_OTHER_VERSION, WLAN_NO_PSDU = 6, 7, 8
WLAN_KINDS = {  # for the reader's warning, in this order
    WLAN_MGMT: "management", WLAN_CTRL: "control", WLAN_EXTENSION: "extension",
    WLAN_NULL: "data without payload (null)", WLAN_PROTECTED: "protected (encrypted)",
    WLAN_AMSDU: "A-MSDU (aggregates, not split)", WLAN_OTHER_VERSION: "802.11 protocol version 1-3",
    WLAN_NO_PSDU: "radiotap 0-length PSDU (no frame)",
}
# Bits of ``rt_present``: the radiotap fields found, and RT_WLAN: an 802.11 frame control field
# of protocol version 0 was read (``wlan_fc``: its first byte high, as Wireshark's wlan.fc).
RT_SIGNAL, RT_RATE, RT_FREQ, RT_WLAN = 1, 2, 4, 8
# ``rt_rate``: the radiotap Rate field (500 kbit/s units, 0-255), or from RT_MCS_RATE on an
# 802.11n MCS field: RT_MCS_RATE + 4 * MCS index (0-76) + 2 * (40 MHz) + (short guard interval).
RT_MCS_RATE = 256
# Data bits per OFDM symbol of the 77 802.11n MCS indexes at 20 MHz (IEEE 802.11-2020 19.5;
# Wireshark's ieee80211_ht_Dbps).
HT_DBPS = (26, 52, 78, 104, 156, 208, 234, 260, 52, 104, 156, 208, 312, 416, 468, 520, 78, 156,
           234, 312, 468, 624, 702, 780, 104, 208, 312, 416, 624, 832, 936, 1040, 12, 156, 208,
           260, 234, 312, 390, 208, 260, 260, 312, 364, 364, 416, 312, 390, 390, 468, 546, 546,
           624, 260, 312, 364, 312, 364, 416, 468, 416, 468, 520, 520, 572, 390, 468, 546, 468,
           546, 624, 702, 624, 702, 780, 780, 858)


def _rate_table() -> np.ndarray:
    """Mbit/s of every ``rt_rate`` code, as tshark 4.0 prints ``radiotap.datarate``: the Rate
    field halved; an MCS field's rate computed in float32 (Dbps x 108 or 52 subcarriers / 52 /
    3.6 or 4 us) and printed to 6 significant digits (MCS 0, 20 MHz, short GI: 7.22222)."""
    table = np.zeros(RT_MCS_RATE + 4 * len(HT_DBPS))
    table[:RT_MCS_RATE] = np.arange(RT_MCS_RATE) / 2
    for mcs, dbps in enumerate(HT_DBPS):
        for wide in (0, 1):
            for short_gi in (0, 1):
                rate = np.float32(dbps * (108 if wide else 52) / 52.0 / (3.6 if short_gi else 4.0))
                table[RT_MCS_RATE + 4 * mcs + 2 * wide + short_gi] = float(f"{rate:.6g}")
    return table


RATE_MBPS = _rate_table()

MAX_INTERFACES = 65536
ABSURD_RECORD = 64 * 1024 * 1024

# (name, dtype) in the order of decode_args in _kernel.c, after the window scratch.
DECODE_OUTPUTS: tuple[tuple[str, str], ...] = (
    ("status", "uint8"), ("vlan_id", "uint16"), ("vlan_count", "uint8"), ("ip_version", "uint8"),
    ("ip_hdr_len", "uint16"), ("ip_len", "uint32"), ("ip_proto", "uint8"), ("ip_ttl", "uint8"),
    ("ip_id", "uint32"), ("ip_flags", "uint8"), ("ip_frag_offset", "uint16"), ("l4", "uint8"),
    ("l4_quoted", "uint8"),        # 6/17: an ICMP error quotes a TCP/UDP header (fields filled)
    ("srcport", "uint16"), ("dstport", "uint16"), ("tcp_seq", "uint32"), ("tcp_ack", "uint32"),
    ("tcp_hdr_len", "uint8"), ("tcp_flags", "uint16"), ("tcp_win", "uint16"), ("tcp_opts", "uint8"),
    ("tcp_mss", "uint16"), ("tcp_ws", "uint8"), ("tcp_tsval", "uint32"), ("tcp_tsecr", "uint32"),
    ("tcp_len", "uint32"),
    ("tcp_sack_count", "uint8"),
    ("tcp_sack_row", "int32"),     # row of the packet's SACK blocks in the compact table, or -1
    ("udp_length", "uint16"), ("icmp_type", "uint8"), ("icmp_code", "uint8"),
    ("icmp_echo", "uint8"), ("icmp_ident", "uint16"), ("icmp_seq", "uint16"),
    ("payload_rel", "uint16"),     # payload offset from the packet's first byte (where l4 != 0)
    ("payload_len", "uint32"),
    ("wlan_kind", "uint8"),        # WLAN_*: an 802.11 frame without an IP packet, and why
    ("rt_present", "uint8"),       # RT_* bits: the radio fields below that were found
    ("rt_signal", "int8"), ("rt_rate", "uint16"), ("rt_freq", "uint16"),
    ("wlan_fc", "uint16"),         # 802.11 frame control (where RT_WLAN)
    ("ethertype", "uint16"),       # the type the link layer hands on (link_layer in _kernel.c)
    ("vlan_ad", "uint8"),          # bit k: VLAN tag k, outermost first, was an 802.1ad S-tag
    ("l3_offset", "uint16"),       # where the network header (or the link header it ended in) is
)


def table_array(shape, dtype) -> np.ndarray:
    """A zeroed array for the packet table, on its own anonymous map: rows never written cost
    no memory, so the table can be sized for the most packets the file could hold.

    Not np.zeros: numpy asks for transparent huge pages on large arrays, and where the kernel
    compacts memory to find them on first write (THP defrag "madvise", Debian's default) a
    7.1M-packet read spent 1.1-1.7 s in the kernel instead of 0.3 s, and 3 of 9 reads of
    1.77M packets took 0.46-0.60 s instead of 0.19 s.  Plain pages cost the same every time.
    """
    dtype = np.dtype(dtype)
    shape = tuple(np.atleast_1d(shape))
    count = int(np.prod(shape))
    buf = mmap.mmap(-1, max(count * dtype.itemsize, 1), flags=mmap.MAP_PRIVATE)  # zero-filled
    return np.frombuffer(buf, dtype, count).reshape(shape)


def room_for(store: dict, n: int, k: int) -> None:
    """Make ``store``'s table arrays (``n`` rows kept) hold ``k`` more rows, where one cannot:
    twice the rows, the kept ones copied.  A table sized from the file's size outgrows it only
    for a gzipped file (more packets than its size on disk)."""
    for name, old in store.items():
        if n + k > len(old):
            store[name] = table_array(2 * (n + k), old.dtype)
            store[name][:n] = old[:n]


def new_outputs(n: int) -> dict[str, np.ndarray]:
    """Zeroed output arrays for up to n packets."""
    return {name: table_array(n, dtype) for name, dtype in DECODE_OUTPUTS}


class SackTable:
    """SACK blocks of the packets that have them, 4 (left, right) pairs a row, filled in order."""

    def __init__(self, capacity: int):
        self.rows = table_array((max(capacity, 1), 8), np.uint32)
        self.used = np.zeros(1, np.int64)

    def trimmed(self) -> np.ndarray:
        return self.rows[: int(self.used[0])].copy()


@dataclass
class Records:
    """Where each packet's bytes are, and its raw lengths and time."""
    data_off: np.ndarray   # int64, offset of the packet's first byte
    caplen: np.ndarray     # uint32
    origlen: np.ndarray    # uint32
    ts: np.ndarray         # int64 ns (pcapng walks leave raw interface units, converted per window)
    iface: np.ndarray      # uint32, index into Interfaces (pcap: all 0)

    @classmethod
    def empty(cls, n: int) -> "Records":
        return cls(*(table_array(n, t) for t in (np.int64, np.uint32, np.uint32, np.int64,
                                                  np.uint32)))

    def at(self, start: int, stop: int | None = None) -> "Records":
        """Views of the rows start:stop (what a window's walk writes into)."""
        sl = slice(start, stop)
        return Records(self.data_off[sl], self.caplen[sl], self.origlen[sl], self.ts[sl], self.iface[sl])


@dataclass
class Interfaces:
    """pcapng interface descriptions, numbered across sections in file order."""
    linktype: np.ndarray   # int32
    snaplen: np.ndarray    # uint32
    tsresol: np.ndarray    # uint8, the raw if_tsresol byte (default 6)
    tsoffset: np.ndarray   # int64 seconds
    local_id: np.ndarray   # uint32, id within its section (what frame.interface_id shows)

    @classmethod
    def empty(cls, n: int = 0) -> "Interfaces":
        n = n or MAX_INTERFACES
        return cls(np.zeros(n, np.int32), np.zeros(n, np.uint32), np.zeros(n, np.uint8),
                   np.zeros(n, np.int64), np.zeros(n, np.uint32))

    def first(self, k: int) -> "Interfaces":
        return Interfaces(*(a[:k].copy() for a in (self.linktype, self.snaplen, self.tsresol,
                                                     self.tsoffset, self.local_id)))


@dataclass
class Status:
    code: int
    offset: int            # file offset of the record the walk stopped at
    packet: int            # its packet number (1-based)
    swapped: bool = False  # pcapng: the byte order of the section the walk stopped in
