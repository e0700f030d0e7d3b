"""Protocol hierarchy: Wireshark's Statistics › Protocol Hierarchy (``tshark -q -z io,phs``),
packets and bytes per protocol layer, as a tree.

A row is a protocol at its place in the tree: its ``path`` names it and the protocols above it,
from the link layer down (``eth/ip/tcp``); the root, ``frame``, is every packet.  ``packets``
counts the packets the protocol appears in at that place, ``bytes`` adds their frame lengths
(``frame_len``, as tshark adds each frame's length to every protocol in it), the shares are
of all packets and bytes, ``avg_capture_bps`` the bytes' bits over the capture span.  Siblings
come in the order they first appear in the file, as tshark lists them.

Down to the transport layer the tree is tshark 4.0's, name for name and count for count:

- link: ``eth``, ``sll`` (Linux cooked v1 and v2), ``raw`` (raw IP, link type 101; raw IPv4 and
  IPv6, 228 and 229, have none), ``null`` (BSD null and loopback), ``wlan`` (802.11), under
  ``radiotap`` and ``wlan_radio`` with a radiotap header; ``vlan`` / ``ieee8021ad`` a VLAN tag
  (802.1Q or 0x9100 / 802.1ad), outermost first;
- under ``wlan``: ``wlan.mgt`` (management frames), ``wlan_ext`` (extension), ``data``
  (protected: encrypted), ``wlan_aggregate`` (A-MSDU), ``llc`` (data frames' LLC/SNAP header);
  control and null frames end at ``wlan``;
- network: ``ip``, ``ipv6``, and any other ethertype by tshark's name for it (``arp``, ``lldp``
  ...; :mod:`.protocol_names`; ``data`` for one tshark has no dissector for); an Ethernet 802.3
  frame (a length, not a type) is ``llc``;
- transport: ``tcp``, ``udp``, ``icmp``, ``icmpv6``, and any other IP protocol by tshark's name
  (``igmp``, ``gre``, ``esp``, ... ``data``).  IPv6 extension headers are part of ``ipv6``, as
  tshark 4.0 shows them.  An ICMP error is ``icmp`` whatever it quotes.  IP fragments as tshark
  reassembles them (its default, ``ip.defragment``): the fragment that completes a datagram
  carries the datagram's protocol, the others are ``data``; a datagram is keyed as tshark keys
  it (addresses, IPv4 protocol xor identification, the VLAN for private or link-local IPv4
  addresses; IPv6 identification), and a fragment not captured whole is not reassembled (an
  IPv4 first one carries its protocol, the others, and every IPv6 one, are ``data``);
- a packet that ends inside a header (its capture cut by the snaplen, or itself shorter than
  its headers say) ends in ``_ws.short`` (``_ws.malformed`` when not the capture but the
  packet, or its IP length, is short): under that header's protocol when as many of its bytes
  are there as tshark's dissector reads before it shows the protocol (TCP 4, UDP 4, ICMP 6,
  ICMPv6 and IPv6 none, IPv4 1, either 8 under raw IP, a VLAN tag 2, LLC 1, 802.11 2; the
  link type's own header: Ethernet and null whole, SLL 4, SLL2 12, raw IP 1, radiotap 4),
  else under the header before -- tshark's place, checked at every length; at a transport it
  ends there, as its payload would.

Above the transport tshark names application protocols by port and by heuristics (``http``,
``tls``, ``dns``, ``data`` when it finds none), by its version and preferences.  pcapstats
does not: the packets that carry TCP or UDP payload are ``payload`` under their transport (a
note says so).  ``decoded`` is false on the rows pcapstats names but does not read (``arp``,
``gre``, an 802.3 ``llc``, ``wlan.mgt`` ...): tshark may show more below them.

Where tshark's tree is not this one (tests/analyses/test_hierarchy.py holds each as said):

- tshark 4.0's io,phs leaves out an ICMP error cut inside the packet it quotes (its ICMP
  dissector leaves the packet marked an error packet, whose frame tap is skipped), so its
  totals miss it; pcapstats counts it, under ``icmp``, as Wireshark's own dialog does;
- a null/loopback address family other than IPv4's and IPv6's is ``data`` (tshark: ``osi``,
  ``ddp``, ``ipx``), an IPv4 header whose version nibble says 6 is an ``ip`` not read (tshark
  reads on as IPv6), and a protocol named by its ethertype or IP protocol is named so even
  where tshark's dissector turns the packet down (Wake-on-LAN without its magic bytes: tshark
  ``data``);
- an 802.11 frame cut inside its 802.11 header: tshark shows ``wlan`` only whole for a QoS
  data frame, and ``_ws.short`` under ``wlan`` for a control, null or protected frame, whose
  header lengths the reader does not keep.

Given a path, the file is read window by window and only the tree's sums are kept (and the
fragments of datagrams not yet complete), so memory does not grow with the capture.
"""

from __future__ import annotations

import ipaddress
import warnings

import numpy as np

from .. import catalogue, schema
from ..batch import analysis
from ..capture import Capture
from ..errors import Note, NothingToReport, SkippedPacketsWarning, UsageError
from ..ingest import read_kept
from ..ingest import contract as K
from ..render import Shown
from ..results import Result, shown
from ..schema import Column, TableSpec
from . import protocol_names as names

ROOT, SHORT, MALFORMED, CARRIED, DATA = "frame", "_ws.short", "_ws.malformed", "payload", "data"

PROTOCOLS = TableSpec("protocols", "one row a protocol at its place in the tree, the tree in "
                      "pre-order (each protocol before the ones under it, siblings in the order "
                      "they first appear)", (
    Column("path", "str", "the protocol and those above it, from the link layer down, joined "
           "by '/' (eth/ip/tcp); frame for the root, every packet", heading="path"),
    Column("protocol", "str", "the protocol, by tshark's filter name (what tshark -z io,phs "
           "prints); payload: packets carrying TCP or UDP payload, which tshark names by "
           "application protocol and pcapstats does not; _ws.short / _ws.malformed: packets "
           "that end inside a header"),
    Column("depth", "int64", "levels under the root: 0 for frame, 1 for the link layer"),
    Column("packets", "int64", "packets the protocol appears in at this place (tshark's "
           "frames)", "packets"),
    Column("packets_share", "float64", "packets / the capture's packets (Wireshark's Percent "
           "Packets)", "fraction"),
    Column("bytes", "int64", "frame bytes of those packets (frame_len: the whole frame, headers "
           "included, as tshark counts it)", "bytes"),
    Column("bytes_share", "float64", "bytes / the capture's frame bytes (Wireshark's Percent "
           "Bytes)", "fraction"),
    catalogue.column("avg_capture_bps", doc="here also the Protocol Hierarchy's Bits/s; "
                     "empty when the capture spans no time"),
    Column("decoded", "bool", "pcapstats read every packet's header of this protocol here, "
           "so the rows under it are all tshark shows (under tcp and udp: payload, pcapstats' "
           "own); false where it named some from the header before (an ethertype, an IP "
           "protocol number, an 802.11 frame type) without reading them, and tshark may show "
           "more under it"),
))


# what the rows count, under the table (and in the report, with what payload is)
ROWS = "packets and bytes each protocol appears in, as Wireshark's Protocol Hierarchy"
PAYLOAD = "payload: TCP/UDP payload, which tshark names by application protocol"


class Hierarchy(Result):
    """The protocol hierarchy (table ``protocols``) of a capture, as Wireshark's Statistics ›
    Protocol Hierarchy.  ``packets``: packets read; ``span_s``: the capture span."""
    analysis = "hierarchy"
    specs = (PROTOCOLS,)
    view = {"protocols": (Shown("protocol", "protocol", indent="depth", key=True),
                          Shown("packets", "packets"), Shown("share", "packets_share"),
                          Shown("bytes", "bytes"), Shown("share", "bytes_share"),
                          shown("avg_capture_bps", minor=True))}
    legend = {"protocols": f"{ROWS}.  --all: each row's path and whether pcapstats read into "
                           "it."}
    draws = True

    def __init__(self, table, *, capture, packets: int, span_s: float, notes=()):
        super().__init__({"protocols": table}, capture=capture, notes=notes)
        self.packets, self.span_s = packets, span_s

    def _figure(self, ax=None, **options):
        from ..plots.hierarchy import hierarchy_figure  # lazy: matplotlib only for a figure
        return hierarchy_figure(self, ax=ax, **options)


PAYLOAD_NOTE = Note("payload: TCP/UDP payload; tshark names its protocol",
                    detail="tshark names the protocol a TCP or UDP payload carries by its port "
                           "and by heuristics (http, tls, dns, or data when it finds none), by "
                           "its version and preferences; pcapstats does not, and counts the "
                           "packets that carry payload as 'payload' under their transport. "
                           "Down to the transport, every row is tshark -z io,phs's")


@analysis(reads=False)
def hierarchy(capture) -> Hierarchy:
    """Wireshark's Protocol Hierarchy of a capture (the module docstring): a path is read
    window by window, keeping the tree's sums only; a Capture read with the fast engine is
    summed whole.  Read from a path, the reader's word on the packets it does not decode
    (802.11 frames without IP, unknown link types) is not said: the tree counts and names
    every one of them."""
    tree = _Tree()
    if isinstance(capture, Capture):
        tree.add(capture)
        tree.done(len(capture))
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SkippedPacketsWarning)
            tree = read_kept(capture, [tree])[0]
    return tree.result()


class _Tree:
    """The hierarchy's sums, fed a capture's packets in file order, a window at a time (a keeper
    of ``ingest.read_kept``) or all at once: a node a protocol at its place, each with its
    packets, bytes, first packet (siblings are listed in that order) and whether pcapstats read
    it; and the IP datagrams being reassembled (``_Reassembly``).  Memory follows the nodes and
    the open datagrams, not the packets."""

    def __init__(self):
        self.names: dict[str, int] = {}          # protocol name -> code
        self.words: list[str] = []               # code -> name
        self.child = np.full((1, 1), -1, np.int64)   # [parent node, name code] -> node
        self.parent, self.code = [-1], [self._name(ROOT)]
        self.packets, self.bytes = np.zeros(1, np.int64), np.zeros(1, np.int64)
        self.first = np.full(1, np.iinfo(np.int64).max, np.int64)
        self.opaque = np.zeros(1, np.int64)    # packets named there but not read
        self.reassembly = _Reassembly()
        self.path, self.total, self.windows = None, 0, 0
        self.first_ns, self.latest_ns = None, None

    @property
    def seen(self) -> bool:
        return self.windows > 0

    def _name(self, name: str) -> int:
        code = self.names.get(name)
        if code is None:
            code = self.names[name] = len(self.words)
            self.words.append(name)
        return code

    # -- a window ---------------------------------------------------------------------------
    def add(self, cap: Capture) -> None:
        missing = [n for n in schema.DECODE_BY_NAME if n not in cap.arrays]
        if missing:
            raise UsageError("the protocol hierarchy reads how pcapstats' reader decoded each "
                             f"packet, which this table lacks ({', '.join(missing)})",
                             path=cap.path, hint="give it the capture's path, or ps.read(path)")
        if not self.windows:
            self.path, self.first_ns = cap.path, cap.first_time_ns
        self.windows += 1
        n = len(cap)
        if not n:
            return
        t = cap.column("frame_time_ns")
        latest = int(t.max())
        self.latest_ns = latest if self.latest_ns is None else max(self.latest_ns, latest)
        _Window(self, cap).classify()

    def step(self, w: "_Window", rows: np.ndarray, codes) -> None:
        """Move the packets ``rows`` of window ``w`` one level down, to their node's child
        named ``codes`` (a code a row, or one for all)."""
        if not len(rows):
            return
        codes = np.broadcast_to(np.asarray(codes, np.int64), rows.shape)
        parents = w.node[rows]
        self._room(len(self.parent), len(self.words))
        node = self.child[parents, codes]
        new = node < 0
        if new.any():                            # children not seen before: made, in file order
            pairs, at = np.unique(parents[new] * len(self.words) + codes[new],
                                  return_index=True)
            for pair in pairs[np.argsort(at)].tolist():
                up, code = divmod(pair, len(self.words))
                self.child[up, code] = len(self.parent)
                self.parent.append(up)
                self.code.append(code)
            node = self.child[parents, codes]
        w.node[rows] = node

    def count(self, w: "_Window") -> None:
        """Count window ``w``'s packets where each ended (its node's ancestors take them in
        :meth:`_whole`): packets, bytes, the first packet's number, and the packets that
        ended on a protocol named but not read (``w.opaque``)."""
        size = len(self.parent)
        grow = size - len(self.packets)
        if grow > 0:
            self.packets = np.r_[self.packets, np.zeros(grow, np.int64)]
            self.bytes = np.r_[self.bytes, np.zeros(grow, np.int64)]
            self.first = np.r_[self.first, np.full(grow, np.iinfo(np.int64).max, np.int64)]
            self.opaque = np.r_[self.opaque, np.zeros(grow, np.int64)]
        self.packets += np.bincount(w.node, minlength=size)
        self.bytes += np.bincount(w.node, weights=w.length, minlength=size).astype(np.int64)
        np.minimum.at(self.first, w.node, w.number)
        self.opaque += np.bincount(w.node[w.opaque], minlength=size)

    def _whole(self) -> tuple[np.ndarray, ...]:
        """(packets, bytes, first packet, opaque packets) of each node's whole subtree: what
        ended there and under it (a child is made after its parent: a higher number)."""
        packets, size = self.packets.copy(), self.bytes.copy()
        first = self.first.copy()
        for node in range(len(self.parent) - 1, 0, -1):
            up = self.parent[node]
            packets[up] += packets[node]
            size[up] += size[node]
            first[up] = min(first[up], first[node])
        return packets, size, first, self.opaque

    def _room(self, nodes: int, codes: int) -> None:
        """The child table holds ``nodes`` parents and ``codes`` names (grown by doubling)."""
        have = self.child.shape
        if have[0] >= nodes and have[1] >= codes:
            return
        grown = np.full((max(have[0], 2 * nodes), max(have[1], 2 * codes)), -1, np.int64)
        grown[:have[0], :have[1]] = self.child
        self.child = grown

    # -- the answer -------------------------------------------------------------------------
    def done(self, total: int) -> "_Tree":
        self.total = total
        return self

    def result(self) -> Hierarchy:
        if not self.total:
            raise NothingToReport(f"no packets in {self.path}", path=self.path)
        whole, size, first, opaque = self._whole()
        order = self._preorder(first)
        span_ns = (self.latest_ns - self.first_ns) if self.latest_ns is not None else 0
        total_packets, total_bytes = int(whole[0]), int(size[0])
        packets, size = whole[order], size[order]
        depth, paths = self._paths(order)
        with np.errstate(divide="ignore", invalid="ignore"):
            bps = size * 8e9 / span_ns if span_ns > 0 else np.full(len(order), np.nan)
        table = {
            "path": paths, "protocol": np.array([self.words[self.code[i]] for i in order],
                                                object),
            "depth": depth, "packets": packets,
            "packets_share": packets / max(total_packets, 1),
            "bytes": size, "bytes_share": size / max(total_bytes, 1),
            "avg_capture_bps": np.asarray(bps, np.float64), "decoded": opaque[order] == 0,
        }
        notes = [PAYLOAD_NOTE] if self._name(CARRIED) in self.code else []
        return Hierarchy(table, capture=self.path, packets=total_packets,
                         span_s=span_ns / 1e9, notes=notes)

    def _preorder(self, first: np.ndarray) -> np.ndarray:
        children: dict[int, list[int]] = {}
        for node in range(1, len(self.parent)):
            children.setdefault(self.parent[node], []).append(node)
        out, stack = [], [0]
        while stack:
            node = stack.pop()
            out.append(node)
            kids = sorted(children.get(node, ()), key=lambda k: first[k])
            stack.extend(reversed(kids))
        return np.array(out, np.int64)

    def _paths(self, order) -> tuple[np.ndarray, np.ndarray]:
        depth, path = {0: 0}, {0: ROOT}
        for node in order[1:].tolist():
            up = self.parent[node]
            depth[node] = depth[up] + 1
            word = self.words[self.code[node]]
            path[node] = word if up == 0 else f"{path[up]}/{word}"
        return (np.array([depth[i] for i in order.tolist()], np.int64),
                np.array([path[i] for i in order.tolist()], object))


class _Window:
    """One window's packets walked down the tree a layer at a time: ``alive`` the packets still
    going down, ``node`` where each one is.  A packet that ends inside a header (or where one
    should begin) ends in ``_ws.short`` (``_ws.malformed`` when not the capture but the packet,
    or its IP length, is too short) under that header's protocol when at least as many of its
    bytes are there as tshark's dissector reads before it shows the protocol (``_SHOWN``), else
    under the header before."""

    def __init__(self, tree: _Tree, cap: Capture):
        self.tree, self.cap = tree, cap
        n = len(cap)
        self.node = np.zeros(n, np.int64)
        self.alive = np.ones(n, bool)
        self.number = cap.column("frame_number").astype(np.int64)
        self.length = cap.column("frame_len").astype(np.int64)      # what tshark adds up
        self.captured = cap.column("frame_cap_len").astype(np.int64)
        self.reported = np.maximum(self.length, self.captured)    # as the reader reads it
        self.l3 = cap.column("l3_offset").astype(np.int64)
        self.opaque = np.zeros(n, bool)          # ended on a protocol named, not read

    def col(self, name: str) -> np.ndarray:
        return self.cap.column(name)

    def go(self, mask, name, read=True) -> None:
        """The live packets of ``mask`` go down to ``name`` (a protocol, or a code a packet);
        ``read`` false (one for all, or one a packet): pcapstats named it without reading it,
        and such a packet goes no further."""
        rows = np.flatnonzero(mask & self.alive)
        code = self.tree._name(name) if isinstance(name, str) else np.asarray(name)[rows]
        self.tree.step(self, rows, code)
        opaque = rows[~(np.asarray(read)[rows] if np.ndim(read) else np.full(len(rows), read))]
        self.opaque[opaque] = True
        self.alive[opaque] = False

    def stop(self, mask) -> None:
        self.alive &= ~mask

    def end(self, mask, start, reported, name=None, shown=0, *, transport=False) -> None:
        """The live packets of ``mask`` end in a header starting at byte ``start`` of the
        packet, whose bytes the packet reports up to ``reported``: under ``name`` (one for all,
        or a code a packet) when ``shown`` of them or more were captured, then in _ws.short
        (or _ws.malformed) -- but at a ``transport`` shown, whose rows below are payload's."""
        rows = np.flatnonzero(mask & self.alive)
        if not len(rows):
            return
        start = np.broadcast_to(start, mask.shape)[rows]
        reported = np.broadcast_to(reported, mask.shape)[rows]
        captured = np.minimum(self.captured[rows], reported)
        if name is not None:
            code = (np.full(len(rows), self.tree._name(name)) if isinstance(name, str)
                    else np.asarray(name)[rows])
            there = captured - start >= np.broadcast_to(shown, mask.shape)[rows]
            self.tree.step(self, rows[there], code[there])
            if transport:
                self.alive[rows[there]] = False
                rows, reported = rows[~there], reported[~there]
        cut = self.captured[rows] < reported
        words = np.where(cut, self.tree._name(SHORT), self.tree._name(MALFORMED))
        self.tree.step(self, rows, words)
        self.alive[rows] = False

    def named(self, values: np.ndarray, name_of) -> np.ndarray:
        """A name code a packet for ``values`` (an ethertype, a protocol number) by
        ``name_of`` (value -> name)."""
        present = np.flatnonzero(np.bincount(values, minlength=1))   # 16-bit values or less
        table = np.zeros(len(present) and int(present[-1]) + 1, np.int64)
        table[present] = [self.tree._name(name_of(int(v))) for v in present.tolist()]
        return table[values]

    # -- the layers ---------------------------------------------------------------------------
    def classify(self) -> None:
        lt = self.col("link_type").astype(np.int64)
        status = self.col("decode_status")
        self._link(lt, status)
        self._wlan(lt, status)
        self._tags(status)
        ip = self._network(lt, status)
        carried, completed, payload = self._transport(lt, ip, status)
        self._payload(carried, completed, payload)
        self.tree.count(self)

    def _link(self, lt, status) -> None:
        unknown = status == K.DS_UNKNOWN_LINKTYPE
        if unknown.any():
            self.go(unknown, self.named(np.where(unknown, lt, lt[unknown][0]), names.link_type),
                    False)
        links = (("eth", (1,)), ("sll", (113, 276)), ("raw", (101, 12, 14)), ("null", (0, 108)),
                 ("radiotap", (127,)))
        cut = status == K.DS_END_LINK
        if cut.any():
            code = np.zeros(len(lt), np.int64)
            for name, types in links:
                code[_any(lt, types)] = self.tree._name(name)
            self.end(cut, 0, self.reported, code, _shown_link(lt))
        for name, types in links:
            self.go(_any(lt, types), name)
        self.stop((lt == 127) & (self.col("wlan_kind") == K.WLAN_NO_PSDU))  # no 802.11 frame
        self.go(lt == 127, "wlan_radio")

    def _wlan(self, lt, status) -> None:
        wlan = _any(lt, (105, 127)) & self.alive
        if not wlan.any():
            return
        self.end(wlan & (status == K.DS_END_WLAN), self.l3, self.reported, "wlan", _SHOWN["wlan"])
        self.go(wlan, "wlan")
        kind = self.col("wlan_kind")
        mgmt = wlan & (kind == K.WLAN_MGMT)          # its 24-byte header before wlan.mgt
        self.end(mgmt & (self.captured - self.l3 < 24), self.l3 + 24, self.reported)
        for value, name in ((K.WLAN_MGMT, "wlan.mgt"), (K.WLAN_EXTENSION, "wlan_ext"),
                            (K.WLAN_PROTECTED, DATA), (K.WLAN_AMSDU, "wlan_aggregate")):
            self.go(wlan & (kind == value), name, False)
        self.stop(wlan & (kind != 0))               # control, null and the others end here
        self.end(wlan & (status == K.DS_END_LLC), self.l3, self.reported, "llc", _SHOWN["llc"])
        snap = self.col("ethertype") != 0
        self.go(wlan, "llc", snap)                  # not SNAP: what it carries is not read

    def _tags(self, status) -> None:
        count = self.col("vlan_count").astype(np.int64)
        tagged = self.alive & (count > 0)
        vlan, s_tag = self.tree._name("vlan"), self.tree._name("ieee8021ad")
        if tagged.any():
            ad = self.col("vlan_ad").astype(np.int64)
            for k in range(int(count[tagged].max())):
                kind = np.where((k < 8) & (((ad >> min(k, 7)) & 1) == 1), s_tag, vlan)
                self.go(tagged & (count > k), kind)
        cut = status == K.DS_END_TAG
        if cut.any():
            kind = np.where(self.col("ethertype") == 0x88A8, s_tag, vlan)
            self.end(cut, self.l3, self.reported, kind, _SHOWN["vlan"])

    def _network(self, lt, status) -> np.ndarray:
        """The protocol the link layer carries; returns the packets with an IP header read."""
        et = self.col("ethertype").astype(np.int64)
        et = np.where(lt == 228, 0x0800, np.where(lt == 229, 0x86DD, et))
        tagged = self.col("vlan_count") > 0
        llc = ((lt == 1) | tagged) & (et >= 1) & (et <= 1500)   # an 802.3 length: LLC
        sll = _any(lt, (113, 276)) & ~tagged & (et < 0x0600)
        code = np.where(llc, self.tree._name("llc"), self.named(et, names.ethertype))
        if sll.any():
            code = np.where(sll, self.named(et, names.sll_protocol), code)
        # bytes tshark reads of the network header before it shows it
        under_raw = _any(lt, (101, 12, 14))
        shown = np.select([(et == 0x0800) & ~under_raw, et == 0x0800, (et == 0x86DD) & ~under_raw,
                           et == 0x86DD, et == 0x0806, llc], [1, 8, 0, 8, 2, 1], 0)
        ip = self.cap.layer(schema.IP)
        here = self.captured - self.l3
        self.end(status == K.DS_END_IP, self.l3, self.reported, code, shown)
        self.end(self.alive & ~ip & (here < shown), self.l3, self.reported)
        data = code == self.tree._name(DATA)
        self.stop(self.alive & data & (here <= 0))  # no bytes: no data row, nothing cut
        self.go(self.alive, code, ip)               # not IP, or not IP as its type says: opaque
        return ip & self.alive

    def _transport(self, lt, ip, status):
        """The protocol over IP, after reassembly; returns (the packets gone to tcp or udp,
        whether each was reassembled, its datagram's payload bytes)."""
        n = len(self.cap)
        proto = self.col("ip_proto").astype(np.int64)
        hdr = self.col("ip_hdr_len").astype(np.int64)
        total = self.col("ip_len").astype(np.int64)
        v4 = self.col("ip_version") == 4
        start = self.l3 + hdr
        reported = self.l3 + np.minimum(total, self.reported - self.l3)
        code = self.named(proto, names.ip_protocol)
        known = np.select([proto == 6, proto == 17, v4 & (proto == 1), ~v4 & (proto == 58)],
                          [_SHOWN["tcp"], _SHOWN["udp"], _SHOWN["icmp"], _SHOWN["icmpv6"]], -1)
        fragment = self.alive & ip & self.col("ip_fragment")
        completed = np.zeros(n, bool)
        payload = np.zeros(n, np.int64)             # a reassembled datagram's payload bytes
        if fragment.any():                          # before its own headers: tshark's order
            whole = (self.captured >= self.l3 + total) & (total >= hdr)
            rows = np.flatnonzero(fragment & whole)
            if len(rows):
                done, size = self.tree.reassembly.add(self, rows, proto, hdr, total)
                completed[rows], payload[rows] = done, size
            # not captured whole, not reassembled: an IPv4 first fragment carries its
            # protocol, the others are data (and every IPv6 one: tshark shows its data)
            first = (self.col("ip_frag_offset") == 0) & v4
            self.go(fragment & ~completed & (whole | ~first), DATA, False)
        ended = ip & ~completed & (status == K.DS_END_L4)
        self.end(ended & (known < 0), start, reported)      # in the IPv6 extension headers
        self.end(ended, start, reported, code, known, transport=True)
        icmp = ip & ~completed & self.cap.layer(schema.ICMP) & v4   # read, not as far as tshark
        self.end(icmp & (np.minimum(self.captured, reported) - start < _SHOWN["icmp"]), start,
                 reported)
        self.stop(self.alive & ip & ~completed & (total < hdr))   # an IPv4 length too short
        own = ~self.col("l4_quoted")
        read = ((self.cap.layer(schema.TCP) & own) | (self.cap.layer(schema.UDP) & own)
                | self.cap.layer(schema.ICMP) | completed) & (known >= 0)
        no_next = ~v4 & (proto == 59)               # IPv6 "no next header": data, if any
        self.stop(ip & no_next & (total <= hdr))
        self.go(ip & no_next, DATA, False)
        self.go(ip, code, read)
        carried = ip & self.alive & _any(proto, (6, 17))
        return carried, completed, payload

    def _payload(self, carried, completed, reassembled_payload) -> None:
        own = ~self.col("l4_quoted")
        tcp = (self.cap.layer(schema.TCP) & own & (self.col("tcp_len") > 0)
               & (self.col("tcp_hdr_len") >= 20))      # a bogus header length: not read on
        udp = self.cap.layer(schema.UDP) & own & (self.col("payload_len") > 0)
        has = np.where(completed, reassembled_payload > 0, tcp | udp)
        self.go(carried & has, CARRIED, False)


# Bytes of a header tshark 4.0 reads before it shows the protocol, when a packet ends inside it
# (what its dissector reads before it adds its row): fewer, and the packet's _ws.short is under
# the protocol before.  Found by cutting packets at every length (tests/analyses/
# test_hierarchy.py holds them to tshark); 0: shown whatever is there.
_SHOWN = {"wlan": 2, "llc": 1, "vlan": 2, "tcp": 4, "udp": 4, "icmp": 6, "icmpv6": 0}


def _any(values: np.ndarray, these) -> np.ndarray:
    """values == any of ``these`` (a few): np.isin, without its sort."""
    out = values == these[0]
    for v in these[1:]:
        out |= values == v
    return out


def _shown_link(lt: np.ndarray) -> np.ndarray:
    """_SHOWN of each link type's own header: Ethernet and null only whole (never when cut),
    SLL after 4 bytes, SLL2 after 12, raw IP after 1, radiotap after 4."""
    return np.select([lt == 113, lt == 276, _any(lt, (101, 12, 14)), lt == 127],
                     [4, 12, 1, 4], 1 << 30)


class _Reassembly:
    """IP datagrams being reassembled, as tshark 4.0 reassembles them (its reassemble.c, first
    pass): a datagram is complete when its fragments cover it from 0 without a gap up to the
    end the first fragment without "more fragments" set; the fragment that completes it carries
    the datagram's protocol, and the datagram is forgotten (a fragment of it that comes later
    starts another).  The key is the addresses and, for IPv4, the protocol xor the
    identification (and the outermost VLAN id when an address is private or link-local), for
    IPv6 the fragment header's identification."""

    def __init__(self):
        # key -> [its end or None, its fragments, (its first fragment's protocol, transport
        # header bytes) or None]
        self.open: dict[tuple, list] = {}
        self.private: dict[int, bool] = {}     # address code -> private or link-local IPv4

    def add(self, w: _Window, rows, proto, hdr, total) -> tuple[np.ndarray, np.ndarray]:
        """Fragments ``rows`` of window ``w`` (captured whole), in file order: whether each
        completes its datagram, and that datagram's transport payload bytes."""
        cap = w.cap
        version = cap.column("ip_version")[rows].tolist()
        src, dst = cap.column("ip_src")[rows].tolist(), cap.column("ip_dst")[rows].tolist()
        ident = cap.column("ip_id")[rows].astype(np.int64).tolist()
        vlan = np.where(cap.column("vlan_count")[rows] > 0, cap.column("vlan_id")[rows],
                        0).tolist()
        offset = (cap.column("ip_frag_offset")[rows].astype(np.int64) * 8).tolist()
        more = cap.column("ip_flags_mf")[rows].tolist()
        size = (total[rows] - hdr[rows]).tolist()
        p = proto[rows].tolist()
        tcp_hdr = cap.column("tcp_hdr_len")[rows].tolist()
        has_tcp = cap.layer(schema.TCP)[rows].tolist()
        done = np.zeros(len(rows), bool)
        payload = np.zeros(len(rows), np.int64)
        for i in range(len(rows)):
            if version[i] == 4:
                tagged = self._private(src[i], cap) or self._private(dst[i], cap)
                key = (4, src[i], dst[i], p[i] ^ ident[i], vlan[i] if tagged else 0)
            else:
                key = (6, src[i], dst[i], ident[i])
            held = self.open.setdefault(key, [None, [], None])
            if offset[i] == 0:          # the transport header's bytes, for the payload
                held[2] = (p[i], tcp_hdr[i] if p[i] == 6 and has_tcp[i] else 8)
            held[1].append((offset[i], size[i]))
            if not more[i] and held[0] is None:
                held[0] = offset[i] + size[i]
            if held[0] is None or _covered(held[1]) < held[0]:
                continue
            done[i] = True
            first_proto, header = held[2] if held[2] is not None else (p[i], 8)
            # a datagram begun by another protocol (alike by protocol xor identification):
            # its header is not this one's, and its payload is not known
            payload[i] = held[0] - header if first_proto == p[i] else 0
            del self.open[key]
        return done, payload

    def _private(self, code: int, cap: Capture) -> bool:
        known = self.private.get(code)
        if known is None:
            try:
                a = ipaddress.IPv4Address(str(cap.addresses[code]))
                known = any(a in net for net in _PRIVATE)
            except ValueError:
                known = False
            self.private[code] = known
        return known


# where tshark keys an IPv4 datagram by its VLAN too: RFC 1918 and link-local addresses
_PRIVATE = tuple(ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12",
                                                     "192.168.0.0/16", "169.254.0.0/16"))


def _covered(fragments: list[tuple[int, int]]) -> int:
    """How far the fragments cover their datagram from byte 0 without a gap (reassemble.c's
    walk over its fragments sorted by offset)."""
    reach = 0
    for start, size in sorted(fragments):
        if start <= reach < start + size:
            reach = start + size
    return reach
