"""The packet table: every column, its type, the Wireshark field it mirrors, and what it means.

This module is the one place where the packet table is defined. Readers fill these columns,
analyses read them, `pcapstats columns` prints this list, and the tests compare each column that
names a Wireshark field against ``tshark -T fields -e <field>`` packet by packet.

A column belongs to a *layer*; it has a value only on packets that carry that layer and is
``<NA>`` elsewhere (in the DataFrame; the raw numpy arrays hold 0 there and the layer's
presence mask says which rows are real):

- ``frame``: every packet;
- ``ip``: IPv4 or IPv6 was decoded (``ip_version`` is 4 or 6);
- ``tcp`` / ``udp`` / ``icmp``: that transport header was decoded.  Non-first IP fragments carry
  no transport header (Wireshark with ``ip.defragment:FALSE`` shows them as data too).  An ICMP
  error that quotes a TCP/UDP header has the ``icmp`` layer *and* the quoted ``tcp``/``udp``
  fields, as in Wireshark, with ``l4_quoted`` set;
- ``stream``: a TCP or UDP header was decoded (own or quoted): the packet belongs to a stream;
- ``vlan``: the frame had at least one VLAN tag; ``icmp_echo``: an ICMP echo (or IPv4
  timestamp/info/mask) request or reply, which carry an identifier and a sequence number;
- ``tcp_opt_*``: the option was present in that TCP header; ``tcp_sackK``: the header had at
  least K SACK blocks;
- ``radiotap_signal`` / ``radiotap_rate`` / ``radiotap_channel``: the packet's radiotap header
  (link type 127, 802.11 in monitor mode) had that field;
- ``wlan``: an 802.11 frame (link type 105 or 127) whose frame control field was captured, of
  protocol version 0 (the only one whose flags Wireshark dissects).

Timestamps are exact int64 nanoseconds since the epoch (``frame_time_ns``); float seconds are
derived from it.  Addresses are strings in the DataFrame (a pandas Categorical: 4 bytes a row).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

# Layers: a column's value is real only where its layer is present.
FRAME, VLAN, IP, TCP, UDP, ICMP, ICMP_ECHO, STREAM = (
    "frame", "vlan", "ip", "tcp", "udp", "icmp", "icmp_echo", "stream")
TCP_OPT_MSS, TCP_OPT_WS, TCP_OPT_SACK_PERM, TCP_OPT_TS = (
    "tcp_opt_mss", "tcp_opt_wscale", "tcp_opt_sack_perm", "tcp_opt_ts")
TCP_SACK1, TCP_SACK2, TCP_SACK3, TCP_SACK4 = "tcp_sack1", "tcp_sack2", "tcp_sack3", "tcp_sack4"
RADIOTAP_SIGNAL, RADIOTAP_RATE, RADIOTAP_CHANNEL = (
    "radiotap_signal", "radiotap_rate", "radiotap_channel")
WLAN = "wlan"
# wlan_fc_type values (802.11 frame types) and wlan_fc_ds values (where a frame goes)
WLAN_DATA = 2
WLAN_DS = {0: "no AP", 1: "to AP", 2: "from AP", 3: "AP to AP"}


@dataclass(frozen=True)
class Column:
    """One column of a table: the packet table here, and every analysis' result tables
    (pcapstats.results), so that `pcapstats columns` and the CSV/JSON/Parquet writers describe
    every table the same way."""
    name: str
    dtype: str                   # numpy dtype name; "str" text; "category" address codes
    doc: str                     # what it means, in one or two sentences
    unit: str | None = None      # "s", "ms", "ns", "bytes", "bit/s", ... UNITLESS: a ratio, a
    #                              score; None: a count, id or text (never a float: see UNITLESS)
    wireshark: str | None = None  # display field(s) it equals, "|"-separated (IPv4|IPv6 variants)
    layer: str | None = None     # packet table: the layer a packet needs for a value
    optional: bool = False       # results: a number that may be missing (NaN, <NA> in pandas)
    values: tuple[str, ...] = ()  # results: the words a text column can hold, when few
    heading: str | None = None   # results: a human table's heading (None: derived from the name)

    def but(self, *, note: str = "", **changes) -> "Column":
        """This shared column as one table carries it: ``note`` added to its meaning (what it
        is in that table: "the request's"), or its ``doc``, ``wireshark``, ``optional`` or
        ``heading`` replaced.  Its name, type, unit and values stay the shared ones, so a
        table narrows an identity column (``STREAM_COLUMN``, ``TIME_COLUMN``, ...) without
        declaring a second one (tests/test_consistency.py holds them to it)."""
        fixed = set(changes) - {"doc", "wireshark", "optional", "heading"}
        if fixed:
            raise TypeError(f"{self.name}: a table may not change {sorted(fixed)} of it")
        doc = changes.pop("doc", self.doc)
        return replace(self, doc=f"{doc}; {note}" if note else doc, **changes)


@dataclass(frozen=True)
class TableSpec:
    """A table: its name, what one row is, and its columns in order (the packet table below;
    every analysis' result tables, pcapstats.results)."""
    name: str
    doc: str
    columns: tuple[Column, ...]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    def with_capture(self) -> "TableSpec":
        """The same table with a first column naming the capture of each row."""
        return TableSpec(self.name, self.doc, (CAPTURE_COLUMN, *self.columns))


CAPTURE_COLUMN = Column("capture", "str", "the capture file of the row (given several)")

# The unit of a number that has none, on purpose: a ratio (after / before, a coefficient of
# variation), a score, a fit's R^2.  Shown as None is ("-", no unit under a heading); a float
# column with unit None is one whose unit was forgotten (tests/test_consistency.py).
UNITLESS = ""

# -- The identity columns of result tables: declared once here and reused by every table that
# carries one (as zeek's conn_id is by every log), so one name means one thing, one type, one
# unit everywhere; a table says what the column is in it with Column.but.  pcapstats.results'
# docstring is the vocabulary in words.
DIRECTIONS = ("a_to_b", "b_to_a")   # direction codes 0 and 1, by name
STREAM_COLUMN = Column("stream", "int64", "tcp.stream or udp.stream index, exactly as "
                       "Wireshark numbers it (pcapstats.streams); the table says which",
                       wireshark="tcp.stream|udp.stream")
DIRECTION_COLUMN = Column("direction", "str", "a_to_b: sent by side A (the source of the "
                          "stream's first packet with its own transport header), b_to_a: by "
                          "side B (pcapstats.streams)", values=DIRECTIONS)
FRAME_NUMBER_COLUMN = Column("frame_number", "int64", "1-based packet number in the file",
                             wireshark="frame.number")
TIME_COLUMN = Column("time_s", "float64", "seconds since the capture's first packet", "s")
# Where the capture was taken, against the traffic a row is about (a TCP stream's data, a ping
# session's requests, a UDP flow's datagrams): at its sender, at its receiver, in the middle of
# the path (a router passed on both sides), further on (past a router from the sender: at the
# receiver or in the middle, one-way traffic cannot tell which) or unknown.  The lab's hosts
# (sidecar.SIDES: a capture on the lab's "router" is in the middle) are a different word list:
# where tcpdump ran, not what the packets show.
CAPTURE_POINTS = ("sender", "receiver", "middle", "further on", "unknown")
CAPTURE_POINT_COLUMN = Column("side", "str", "where the capture was taken: sender, receiver, "
                              "middle (of the path), further on (past a router: the receiver "
                              "or the middle) or unknown", values=CAPTURE_POINTS)
# side A's and side B's endpoints, in the order tables carry them
ENDPOINT_COLUMNS = (
    Column("address_a", "str", "address of side A (the source of the stream's first packet)"),
    Column("port_a", "int64", "port of side A"),
    Column("address_b", "str", "address of side B"),
    Column("port_b", "int64", "port of side B"),
)
IDENTITY_COLUMNS = (CAPTURE_COLUMN, STREAM_COLUMN, DIRECTION_COLUMN, FRAME_NUMBER_COLUMN,
                    TIME_COLUMN, *ENDPOINT_COLUMNS, CAPTURE_POINT_COLUMN)


def _C(name, dtype, layer, wireshark, doc, unit=None) -> Column:
    """A packet-table column (positional, in the order the table below reads best)."""
    return Column(name, dtype, doc, unit=unit, wireshark=wireshark, layer=layer)


COLUMNS: tuple[Column, ...] = (
    # -- frame -------------------------------------------------------------------------------
    _C("frame_number", "uint32", FRAME, "frame.number", "1-based packet number in the file."),
    _C("frame_time_ns", "int64", FRAME, None,
       "Capture time, exact integer nanoseconds since the epoch (frame.time_epoch * 1e9).", unit="ns"),
    _C("frame_time_epoch", "float64", FRAME, "frame.time_epoch",
       "Capture time in seconds since the epoch (float; derived from frame_time_ns).", unit="s"),
    _C("frame_time_relative", "float64", FRAME, "frame.time_relative",
       "Seconds since the first packet of the capture.", unit="s"),
    _C("frame_len", "uint32", FRAME, "frame.len", "Bytes the packet had on the wire.", unit="bytes"),
    _C("frame_cap_len", "uint32", FRAME, "frame.cap_len",
       "Bytes captured (less than frame_len when the snaplen cut the packet).", unit="bytes"),
    _C("frame_interface_id", "uint32", FRAME, "frame.interface_id",
       "pcapng interface id within its section (0 for classic pcap)."),
    _C("link_type", "uint16", FRAME, None,
       "LINKTYPE_* of the packet's interface (1 Ethernet, 113 SLL, 276 SLL2, 101 raw IP, 0 null)."),
    _C("vlan_id", "uint16", VLAN, "ieee8021ad.id|vlan.id",
       "Outermost VLAN id (802.1ad S-tag, else the first 802.1Q tag); <NA> when untagged "
       "(see vlan_count)."),
    _C("vlan_count", "uint8", FRAME, None, "Number of VLAN tags (0, 1, 2 for QinQ ...)."),
    _C("frame_offset", "int64", FRAME, None,
       "Offset of the packet's first byte in the (decompressed) file: where to look with a hex "
       "editor, and what error messages quote.", unit="bytes"),
    # -- IP (v4 or v6) -----------------------------------------------------------------------
    _C("ip_version", "uint8", IP, "ip.version|ipv6.version", "4 or 6."),
    _C("ip_src", "category", IP, "ip.src|ipv6.src", "Source address as text."),
    _C("ip_dst", "category", IP, "ip.dst|ipv6.dst", "Destination address as text."),
    _C("ip_hdr_len", "uint16", IP, "ip.hdr_len",
       "IP header length in bytes; for IPv6 40 plus the extension headers walked.", unit="bytes"),
    _C("ip_len", "uint32", IP, "ip.len",
       "Total IP packet length from the header (IPv6: payload length + 40). Transport lengths "
       "come from this, not from the captured bytes, as in Wireshark.", unit="bytes"),
    _C("ip_proto", "uint8", IP, "ip.proto",
       "Upper-layer protocol: IPv4's protocol field; for IPv6 the next header after walking the "
       "extension headers (6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6)."),
    _C("ip_ttl", "uint8", IP, "ip.ttl|ipv6.hlim", "IPv4 TTL or IPv6 hop limit."),
    _C("ip_id", "uint32", IP, "ip.id|ipv6.fraghdr.ident",
       "IPv4 identification; for IPv6 the fragment header's identification, else 0."),
    _C("ip_flags_df", "bool", IP, "ip.flags.df", "IPv4 don't-fragment flag."),
    _C("ip_flags_mf", "bool", IP, "ip.flags.mf|ipv6.fraghdr.more",
       "More-fragments flag (IPv4, or the IPv6 fragment header)."),
    _C("ip_frag_offset", "uint16", IP, "ip.frag_offset|ipv6.fraghdr.offset",
       "Fragment offset in 8-byte units, as carried in the header.", unit="8 bytes"),
    _C("ip_fragment", "bool", IP, None,
       "The packet is an IP fragment (MF set or offset > 0). Only the first fragment carries "
       "transport fields; pcapstats does not reassemble."),
    # -- TCP -----------------------------------------------------------------------------------
    _C("tcp_srcport", "uint16", TCP, "tcp.srcport", "TCP source port."),
    _C("tcp_dstport", "uint16", TCP, "tcp.dstport", "TCP destination port."),
    _C("tcp_stream", "int64", TCP, "tcp.stream",
       "TCP stream index, numbered exactly as Wireshark numbers it (see pcapstats.streams)."),
    _C("tcp_seq_raw", "uint32", TCP, "tcp.seq_raw", "Sequence number as on the wire."),
    _C("tcp_ack_raw", "uint32", TCP, "tcp.ack_raw",
       "Acknowledgement number as on the wire (also when the ACK flag is clear)."),
    _C("tcp_hdr_len", "uint8", TCP, "tcp.hdr_len", "TCP header length in bytes.", unit="bytes"),
    _C("tcp_flags", "uint16", TCP, "tcp.flags",
       "The 12 flag bits (FIN 0x001, SYN 0x002, RST 0x004, PSH 0x008, ACK 0x010, URG 0x020, "
       "ECE 0x040, CWR 0x080, NS/AE 0x100, reserved 0xE00)."),
    _C("tcp_window_size_value", "uint16", TCP, "tcp.window_size_value",
       "Window field as on the wire, before window scaling.", unit="bytes"),
    _C("tcp_len", "uint32", TCP, "tcp.len",
       "TCP payload length from the IP length (right even when the snaplen cut the payload).", unit="bytes"),
    _C("tcp_option_mss", "uint16", TCP_OPT_MSS, "tcp.options.mss_val", "MSS option value.", unit="bytes"),
    _C("tcp_option_wscale_shift", "uint8", TCP_OPT_WS, "tcp.options.wscale.shift",
       "Window-scale option shift count."),
    _C("tcp_option_sack_perm", "bool", TCP, None, "SACK-permitted option present."),
    _C("tcp_option_tsval", "uint32", TCP_OPT_TS, "tcp.options.timestamp.tsval",
       "Timestamp option TSval."),
    _C("tcp_option_tsecr", "uint32", TCP_OPT_TS, "tcp.options.timestamp.tsecr",
       "Timestamp option TSecr."),
    _C("tcp_sack_count", "uint8", TCP, None, "Number of SACK blocks in the header (0-4)."),
    *(c for k, layer in enumerate((TCP_SACK1, TCP_SACK2, TCP_SACK3, TCP_SACK4), start=1)
      for c in (
          _C(f"tcp_sack_le{k}_raw", "uint32", layer, None,
             f"Left edge of SACK block {k}, raw sequence number."),
          _C(f"tcp_sack_re{k}_raw", "uint32", layer, None,
             f"Right edge of SACK block {k}, raw sequence number."))),
    # -- UDP -----------------------------------------------------------------------------------
    _C("udp_srcport", "uint16", UDP, "udp.srcport", "UDP source port."),
    _C("udp_dstport", "uint16", UDP, "udp.dstport", "UDP destination port."),
    _C("udp_stream", "int64", UDP, "udp.stream",
       "UDP stream index, numbered exactly as Wireshark numbers it."),
    _C("udp_length", "uint16", UDP, "udp.length", "UDP length field (header + payload).", unit="bytes"),
    # -- ICMP / ICMPv6 -------------------------------------------------------------------------
    _C("icmp_type", "uint8", ICMP, "icmp.type|icmpv6.type", "ICMP or ICMPv6 type."),
    _C("icmp_code", "uint8", ICMP, "icmp.code|icmpv6.code", "ICMP or ICMPv6 code."),
    _C("icmp_ident", "uint16", ICMP_ECHO, "icmp.ident|icmpv6.echo.identifier",
       "Echo identifier (echo request/reply, and IPv4 timestamp/info/mask messages)."),
    _C("icmp_seq", "uint16", ICMP_ECHO, "icmp.seq|icmpv6.echo.sequence_number",
       "Echo sequence number, big-endian (echo request/reply only, else <NA>)."),
    Column("direction", "category", "a_to_b when the packet's source address and port are "
           "side A's (the source of its stream's first packet), else b_to_a; see "
           "pcapstats.streams", layer=STREAM, values=DIRECTIONS),
    _C("l4_quoted", "bool", FRAME, None,
       "The TCP/UDP columns hold the header quoted inside this ICMP error, not a header of the "
       "packet's own. Wireshark dissects that header and gives it a stream index (so it counts "
       "for stream numbering), but its conversation tables leave the packet out, and so does "
       "pcapstats throughput."),
    # -- payload (pcapstats' own) ---------------------------------------------------------------
    _C("payload_offset", "int64", FRAME, None,
       "File offset of the transport payload (TCP/UDP data, ICMP body); -1 when none decoded.", unit="bytes"),
    _C("payload_len", "uint32", FRAME, None,
       "Payload bytes by the headers (tcp_len, udp_length - 8, ...); 0 when none decoded.", unit="bytes"),
    _C("payload_cap_len", "uint32", FRAME, None,
       "Payload bytes actually present in the file (less than payload_len when cut).", unit="bytes"),
    # -- 802.11 radio (radiotap header, link type 127) ------------------------------------------
    _C("radiotap_dbm_antsignal", "int8", RADIOTAP_SIGNAL, "radiotap.dbm_antsignal",
       "Received signal strength the capturing card reported (radiotap dBm antenna signal). "
       "With several antennas the first one in the header: Linux puts the combined signal "
       "first, each antenna's in later radiotap namespaces.", unit="dBm"),
    _C("radiotap_datarate", "float64", RADIOTAP_RATE, "radiotap.datarate",
       "PHY data rate of the frame: radiotap's Rate field (500 kbit/s units), or for 802.11n the "
       "rate of its MCS field's index, bandwidth and guard interval as Wireshark computes it "
       "(float32, 6 significant digits: 7.22222 for MCS 0 at 20 MHz, short GI). <NA> for "
       "802.11ac/ax frames (VHT/HE fields: Wireshark gives no radiotap.datarate there) and "
       "where the MCS field lacks the bandwidth, index or guard interval.", unit="Mbit/s"),
    _C("radiotap_channel_freq", "uint16", RADIOTAP_CHANNEL, "radiotap.channel.freq",
       "Centre frequency of the channel the frame was received on (radiotap Channel field; "
       "2412 is channel 1 at 2.4 GHz, 5180 channel 36).", unit="MHz"),
    # -- 802.11 frame control (link types 105 and 127) ------------------------------------------
    _C("wlan_fc_type", "uint8", WLAN, "wlan.fc.type",
       "802.11 frame type: 0 management (beacons ...), 1 control (ACKs, RTS/CTS ...), 2 data "
       "(data, QoS data, null), 3 extension."),
    _C("wlan_fc_ds", "uint8", WLAN, "wlan.fc.ds",
       "The frame's To DS and From DS bits (To DS + 2 x From DS): 1 a station's frame to its "
       "access point, 2 the access point's to a station, 0 neither (management, control, ad "
       "hoc), 3 both (between access points, mesh)."),
    _C("wlan_fc_retry", "bool", WLAN, "wlan.fc.retry",
       "The Retry flag: the sender sent this frame before and is sending it again (802.11's own "
       "re-send after a missing acknowledgement)."),
)

BY_NAME: dict[str, Column] = {c.name: c for c in COLUMNS}
PACKET_TABLE = TableSpec("packets", "one row per packet, in file order (ps.read(path).packets)",
                         COLUMNS)

# How far the reader's decode of a packet got (``decode_status``): the values of
# pcapstats.ingest.contract's DS_* codes, in order.
DECODE_STATUS = ("ok", "unknown link type", "malformed network header", "ended in its link "
                 "header", "ended in its 802.11 header", "ended in its LLC/SNAP header",
                 "ended in a VLAN tag", "ended in its IP header", "ended before its transport")

# What the fast reader knows of how each packet was decoded, beside the packet table: not fields
# of the packet but the decode's own facts, which the protocol hierarchy reads (Capture.column;
# a Needs may name them).  The packet table (``packets``) leaves them out; a table read by the
# tshark engine has none.
DECODE_FACTS: tuple[Column, ...] = (
    Column("decode_status", "uint8", "how far the decode got, an index into DECODE_STATUS: 0 "
           "every header the reader decodes was read; else the header the packet ended in (its "
           "captured bytes ran out, or for what follows the IP header the IP length), or a "
           "network header that is not what its type says", layer=FRAME),
    Column("ethertype", "uint16", "the type the link layer handed on: Ethernet's, SLL's or an "
           "802.11 LLC/SNAP header's type field after any VLAN tags (an 802.3 length when 1500 or "
           "less), IPv4's 0x0800 or IPv6's 0x86DD for raw IP and null by their version or address "
           "family; 0 when none (802.11 frames without SNAP, other null families); for a packet "
           "that ended in a VLAN tag, the tag's TPID", layer=FRAME),
    Column("vlan_ad", "uint8", "bit k set: VLAN tag k (outermost first, the first 8 tags) was an "
           "802.1ad S-tag (TPID 0x88A8) rather than 802.1Q", layer=FRAME),
    Column("l3_offset", "uint16", "where the network header starts, from the packet's first "
           "byte (the bytes of its link headers); for a packet that ended in a link header, where "
           "that header starts", unit="bytes", layer=FRAME),
    Column("wlan_kind", "uint8", "an 802.11 frame that carries no IP packet, and why (the "
           "reader's warning counts them): 1 management, 2 control, 3 extension, 4 data without "
           "payload, 5 protected, 6 A-MSDU, 7 another protocol version, 8 radiotap's 0-length "
           "PSDU; 0 otherwise", layer=FRAME),
)
DECODE_BY_NAME: dict[str, Column] = {c.name: c for c in DECODE_FACTS}

# Columns the decoder fills with echo fields only for these ICMP types (echo request/reply).
ICMP_ECHO_TYPES = {4: (0, 8), 6: (128, 129)}

# The TTLs (hop limits) hosts start packets with: a packet captured where it was sent still
# carries one, one that crossed a router carries one less (sent_here).
INITIAL_TTLS = (32, 64, 128, 255)


def sent_here(ttl):
    """Whether a packet of this TTL (IPv6 hop limit) was captured where it was sent: it still
    carries one of INITIAL_TTLS, no router has taken one off.  The one test behind every
    capture side told by TTLs (tcp_flow, ping, udp, verify); an int gives a bool, an array
    an array of them."""
    here = np.isin(ttl, INITIAL_TTLS)
    return bool(here) if here.ndim == 0 else here


def numpy_dtype(column: Column) -> np.dtype:
    """Storage dtype of a column's raw array (categories are stored as int32 codes)."""
    return np.dtype("int32" if column.dtype == "category" else column.dtype)


