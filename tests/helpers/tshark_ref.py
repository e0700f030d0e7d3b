"""Reference answers for a capture, taken from tshark (and the file's own record headers).

- :func:`packet_reference`: the value every packet-table column should have, packet by
  packet, from ``tshark -T fields`` (one column per Wireshark field named in schema.py, plus the
  few columns derived from tshark fields by the schema's own definitions; see ``_DERIVED``).
- :func:`conversation_reference`: one row per TCP/UDP stream as ``tshark -q -z conv,tcp|udp``
  prints it (frames each way, relative start, duration, which side is A), with exact byte counts
  from a per-packet pass (tshark 4.0 prints "671 kB") that is checked against the printed table.

tshark runs with ``ip.defragment`` / ``ipv6.defragment`` off (pcapstats does not reassemble) and
raw sequence numbers.  Results are cached per file: several tests ask for the same capture.
"""

from __future__ import annotations

import functools
import re
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pcapstats import schema

PREFS = ("-o", "ip.defragment:FALSE", "-o", "ipv6.defragment:FALSE",
         "-o", "tcp.relative_sequence_numbers:FALSE")
ETH_HEADER = 14

# Fields read besides the schema's own: to derive the IPv6 and bookkeeping columns.
_EXTRA_FIELDS = (
    "frame.protocols", "ipv6.plen", "ipv6.nxt", "ipv6.hopopts.nxt", "ipv6.hopopts.len_oct",
    "ipv6.dstopts.nxt", "ipv6.dstopts.len_oct", "ipv6.routing.nxt", "ipv6.routing.len_oct",
    "ipv6.fraghdr.nxt", "ipv6.fraghdr.offset", "ipv6.fraghdr.more", "ipv6.fraghdr.ident",
    "tcp.options.sack_perm",
)
# Fields that occur several times in one packet and are read with occurrence=a.
_ALL_FIELDS = ("vlan.id", "tcp.options.sack_le", "tcp.options.sack_re")
# schema.py names fields tshark 4.0 does not have; these are tshark 4.0's names for them.
_TSHARK_4_0_NAME = {"ipv6.fragment.more": "ipv6.fraghdr.more",
                    "ipv6.fragment.offset": "ipv6.fraghdr.offset"}


class ReferenceError(AssertionError):
    """The reference itself is inconsistent (tshark's conv table vs its per-packet fields)."""


def tshark(*args: str) -> str:
    proc = subprocess.run(["tshark", "-n", *PREFS, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"tshark {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def tshark_fields(path: Path | str, fields: tuple[str, ...], occurrence: str = "f"
                  ) -> pd.DataFrame:
    """``tshark -T fields`` for these fields: one string column each, <NA> where empty."""
    args = ["-r", str(path), "-T", "fields", "-E", "separator=/t", "-E", f"occurrence={occurrence}",
            "-E", "quote=n"]
    for f in fields:
        args += ["-e", f]
    rows = [line.split("\t") for line in tshark(*args).splitlines()]
    if any(len(r) != len(fields) for r in rows):
        raise ReferenceError(f"tshark printed a row without {len(fields)} fields for {path}")
    df = pd.DataFrame(rows, columns=list(fields), dtype="string")
    return df.replace("", pd.NA)


def comparable(series: pd.Series) -> pd.Series:
    """A packet-table column as plain nullable values: strings, Int64 (bools as 0/1), Float64,
    to set beside a reference column."""
    s = series.reset_index(drop=True)
    if isinstance(s.dtype, pd.CategoricalDtype) or s.dtype == object:
        return s.astype("string")
    if pd.api.types.is_bool_dtype(s.dtype):
        return s.astype("Int64")
    if pd.api.types.is_float_dtype(s.dtype):
        return s.astype("Float64")
    return s.astype("Int64")


def schema_fields() -> dict[str, list[str]]:
    """Schema column -> the tshark 4.0 field(s) it names (the "a|b" variants split)."""
    return {c.name: [_TSHARK_4_0_NAME.get(f, f) for f in c.wireshark.split("|")]
            for c in schema.COLUMNS if c.wireshark}


def _int(s: pd.Series) -> pd.Series:
    """tshark's integers as Int64: decimal, "0x..." hex (ip.id, tcp.flags), "True"/"False"."""
    def one(v):
        if v is pd.NA:
            return pd.NA
        v = {"True": "1", "False": "0"}.get(v, v)
        return int(v, 0)
    return pd.array([one(v) for v in s], dtype="Int64")


def _coalesce(df: pd.DataFrame, names: list[str]) -> pd.Series:
    out = df[names[0]].copy()
    for n in names[1:]:
        out = out.fillna(df[n])
    return out


def epoch_ns(text: str) -> int:
    """tshark's printed "1700000000.123456789" as exact integer nanoseconds."""
    sec, _, frac = text.partition(".")
    sign = -1 if sec.startswith("-") else 1
    return int(sec) * 1_000_000_000 + sign * int(frac.ljust(9, "0")[:9])


# -- the file's own record headers (independent of tshark and of pcapstats) -------------------

def record_layout(path: Path | str) -> pd.DataFrame:
    """Per packet: file offset of its first byte and the link type of its interface.

    A plain walk of classic pcap records or pcapng blocks (SHB, IDB, EPB, SPB), written for
    this test only: the oracle for ``frame_offset`` and ``link_type``.
    """
    data = Path(path).read_bytes()
    offsets, linktypes = [], []
    magic = data[:4]
    pcap_magics = (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\xc3\xd4",
                   b"\xa1\xb2\x3c\x4d")
    if magic in pcap_magics:
        bo = "<" if magic[0] in (0xd4, 0x4d) else ">"
        linktype = struct.unpack_from(bo + "I", data, 20)[0] & 0xFFFF
        pos = 24
        while pos + 16 <= len(data):
            caplen = struct.unpack_from(bo + "I", data, pos + 8)[0]
            offsets.append(pos + 16)
            linktypes.append(linktype)
            pos += 16 + caplen
    elif magic == b"\x0a\x0d\x0d\x0a":
        pos, bo, ifaces = 0, "<", []
        while pos + 12 <= len(data):
            btype = struct.unpack_from(bo + "I", data, pos)[0]
            if btype == 0x0A0D0D0A:
                bo = "<" if data[pos + 8:pos + 12] == b"\x4d\x3c\x2b\x1a" else ">"
                ifaces = []
            blen = struct.unpack_from(bo + "I", data, pos + 4)[0]
            if btype == 1:
                ifaces.append(struct.unpack_from(bo + "H", data, pos + 8)[0])
            elif btype == 6:
                offsets.append(pos + 28)
                linktypes.append(ifaces[struct.unpack_from(bo + "I", data, pos + 8)[0]])
            elif btype == 3:
                offsets.append(pos + 12)
                linktypes.append(ifaces[0])
            pos += blen
    else:
        raise ValueError(f"{path}: not a pcap or pcapng file")
    return pd.DataFrame({"frame_offset": pd.array(offsets, dtype="Int64"),
                         "link_type": pd.array(linktypes, dtype="Int64")})


# -- per-packet reference -----------------------------------------------------------------------

@dataclass
class PacketReference:
    """Expected value of each packet-table column, and the rows where it is checked."""
    values: pd.DataFrame          # one column per checked packet-table column
    checked: dict[str, np.ndarray]  # column -> bool mask of rows with a reference value
    raw: pd.DataFrame             # tshark's strings, for error messages


def _outer_transport(protocols: pd.Series) -> pd.Series:
    """The first transport protocol in frame.protocols ("tcp", "udp", "icmp", "icmpv6") or <NA>.

    An ICMP error quotes the offending packet's IP and transport headers; tshark decodes them,
    so "tcp"/"udp" appear after "icmp" there.  The outer one is what the packet *is*.
    """
    def first(p):
        if p is pd.NA:
            return pd.NA
        for token in p.split(":"):
            if token in ("tcp", "udp", "icmp", "icmpv6"):
                return token
        return pd.NA
    return pd.Series([first(p) for p in protocols], dtype="string")


def _ipv6_walk(raw: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(header bytes, upper-layer protocol) of each IPv6 packet after its extension headers.

    The chain's order is taken from frame.protocols ("ipv6:ipv6.hopopts:ipv6.fraghdr:..."),
    lengths from ``ipv6.<ext>.len_oct`` (the fragment header is 8 bytes), the protocol from the
    last header's next-header field (``ipv6.nxt`` when there are no extension headers).
    """
    hdr_len, proto = [], []
    for i, protocols in enumerate(raw["frame.protocols"]):
        if raw["ipv6.nxt"].iat[i] is pd.NA:
            hdr_len.append(pd.NA)
            proto.append(pd.NA)
            continue
        tokens = protocols.split(":")
        chain = []
        for token in tokens[tokens.index("ipv6") + 1:]:
            if not token.startswith("ipv6."):
                break
            chain.append(token.removeprefix("ipv6."))
        length, nxt = 40, int(raw["ipv6.nxt"].iat[i])
        for ext in chain:
            length += 8 if ext == "fraghdr" else int(raw[f"ipv6.{ext}.len_oct"].iat[i])
            nxt = int(raw[f"ipv6.{ext}.nxt"].iat[i])
        hdr_len.append(length)
        proto.append(nxt)
    return pd.Series(hdr_len, dtype="Int64"), pd.Series(proto, dtype="Int64")


@functools.lru_cache(maxsize=8)
def packet_reference(path: Path | str) -> PacketReference:
    """What tshark says every column of every packet should be."""
    named = schema_fields()
    fields = tuple(dict.fromkeys([f for fs in named.values() for f in fs] + list(_EXTRA_FIELDS)))
    raw = tshark_fields(path, fields)
    multi = tshark_fields(path, _ALL_FIELDS, occurrence="a")
    n = len(raw)
    everywhere = np.ones(n, bool)
    values, checked = {}, {}

    def put(col, series, rows=everywhere):
        values[col] = pd.Series(series).reset_index(drop=True)
        checked[col] = np.asarray(rows, bool)

    for col, names in named.items():
        if schema.BY_NAME[col].dtype == "category":
            put(col, _coalesce(raw, names))
        elif schema.BY_NAME[col].dtype == "float64":
            put(col, pd.array([pd.NA if v is pd.NA else float(v)
                               for v in _coalesce(raw, names)], dtype="Float64"))
        else:
            put(col, _int(_coalesce(raw, names)))

    # Classic pcap has one implicit interface: tshark prints no frame.interface_id there, the
    # schema says 0.
    values["frame_interface_id"] = values["frame_interface_id"].fillna(0)

    # Exact time, from the printed 9-decimal epoch.
    put("frame_time_ns", pd.array([epoch_ns(v) for v in raw["frame.time_epoch"]], dtype="Int64"))

    # IPv6: the schema defines these IP-layer columns for IPv6 too; tshark has no ip.* there.
    v6 = raw["ipv6.version"].notna().to_numpy()
    v6_hdr, v6_proto = _ipv6_walk(raw)
    plen = _int(raw["ipv6.plen"])
    by_v6 = {
        "ip_hdr_len": v6_hdr,                      # 40 + extension headers walked
        "ip_len": plen + 40,                       # payload length + 40
        "ip_proto": v6_proto,                      # next header after the extension headers
        "ip_id": _int(raw["ipv6.fraghdr.ident"]).fillna(0),  # fragment header's id, else 0
        "ip_flags_df": pd.array([0] * n, dtype="Int64"),     # IPv6 has no DF flag
        "ip_flags_mf": _int(raw["ipv6.fraghdr.more"]).fillna(0),
        "ip_frag_offset": _int(raw["ipv6.fraghdr.offset"]).fillna(0),
    }
    for col, series in by_v6.items():
        values[col] = values[col].where(~v6, pd.Series(series))

    # Fragments: MF set or offset > 0, in IPv4 or in an IPv6 fragment header.
    ip = values["ip_version"].notna()
    frag = (values["ip_flags_mf"].fillna(0) == 1) | (values["ip_frag_offset"].fillna(0) > 0)
    put("ip_fragment", pd.array(np.where(ip, frag.astype(int), pd.NA), dtype="Int64"))

    # TCP options without a value field, and the SACK blocks (raw sequence numbers).
    tcp = raw["tcp.srcport"].notna().to_numpy()
    put("tcp_option_sack_perm",
        pd.array(np.where(tcp, raw["tcp.options.sack_perm"].notna().astype(int), pd.NA),
                 dtype="Int64"))
    edges = {side: [[] if v is pd.NA else [int(x) for x in v.split(",")]
                    for v in multi[f"tcp.options.sack_{side}"]] for side in ("le", "re")}
    put("tcp_sack_count", pd.array([len(b) if t else pd.NA for b, t in zip(edges["le"], tcp)],
                                   dtype="Int64"))
    for k in range(1, 5):
        for side in ("le", "re"):
            put(f"tcp_sack_{side}{k}_raw",
                pd.array([b[k - 1] if len(b) >= k else pd.NA for b in edges[side]],
                         dtype="Int64"))
    put("vlan_count", pd.array([0 if v is pd.NA else len(v.split(",")) for v in multi["vlan.id"]],
                               dtype="Int64"))

    # Where the bytes are: the file's own record headers.
    layout = record_layout(path)
    if len(layout) != n:
        raise ReferenceError(f"{path}: {len(layout)} records in the file, tshark saw {n}")
    put("frame_offset", layout["frame_offset"])
    put("link_type", layout["link_type"])

    # A TCP/UDP header that tshark found only inside an ICMP error (the packet is ICMP).
    outer = _outer_transport(raw["frame.protocols"])
    quoted = (outer.isin(["icmp", "icmpv6"]).to_numpy(dtype=bool, na_value=False)
              & (raw["tcp.srcport"].notna() | raw["udp.srcport"].notna()).to_numpy())
    put("l4_quoted", pd.array(quoted.astype(int), dtype="Int64"))

    # Direction within the stream tshark numbered: side A is the (source address, port) of the
    # stream's first packet whose transport header is its own (of its first quoted one when it
    # has none); the packet's outer source address counts.
    src = _coalesce(raw, ["ip.src", "ipv6.src"])
    side_a, direction = {}, []
    for own in (True, False):
        for i in range(n):
            for proto in ("tcp", "udp"):
                sid = raw[f"{proto}.stream"].iat[i]
                if sid is not pd.NA and bool(quoted[i]) != own:
                    side_a.setdefault((proto, sid), (src.iat[i], raw[f"{proto}.srcport"].iat[i]))
    for i in range(n):
        proto = "tcp" if raw["tcp.stream"].iat[i] is not pd.NA else \
            "udp" if raw["udp.stream"].iat[i] is not pd.NA else None
        if proto is None:
            direction.append(pd.NA)
        else:
            a = side_a[(proto, raw[f"{proto}.stream"].iat[i])]
            direction.append("a_to_b" if (src.iat[i], raw[f"{proto}.srcport"].iat[i]) == a
                             else "b_to_a")
    put("direction", pd.Series(direction, dtype="string"))

    # Payload: defined for TCP and UDP packets (their own header, not one quoted in an ICMP
    # error), and as "none decoded" (-1 / 0) where tshark found no transport header at all.
    is_tcp = (outer == "tcp").to_numpy(dtype=bool, na_value=False)
    is_udp = (outer == "udp").to_numpy(dtype=bool, na_value=False)
    none = outer.isna().to_numpy()
    eth = raw["frame.protocols"].str.startswith("eth:").to_numpy(dtype=bool, na_value=False)
    ip_hdr = values["ip_hdr_len"].fillna(0).to_numpy("int64")
    thl = np.where(is_tcp, values["tcp_hdr_len"].fillna(0).to_numpy("int64"), 8)
    plen = np.where(is_tcp, values["tcp_len"].fillna(0).to_numpy("int64"),
                    values["udp_length"].fillna(8).to_numpy("int64") - 8)
    start = layout["frame_offset"].to_numpy("int64") + ETH_HEADER + ip_hdr + thl
    cap = values["frame_cap_len"].to_numpy("int64")
    present = np.clip(cap - (ETH_HEADER + ip_hdr + thl), 0, plen)
    transport = (is_tcp | is_udp) & eth
    put("payload_len", pd.array(np.where(transport, plen, 0), dtype="Int64"), transport | none)
    put("payload_cap_len", pd.array(np.where(transport, present, 0), dtype="Int64"),
        transport | none)
    put("payload_offset", pd.array(np.where(transport, start, -1), dtype="Int64"),
        transport | none)

    return PacketReference(pd.DataFrame(values), checked, raw)


# -- conversations ---------------------------------------------------------------------------

_CONV_RE = re.compile(
    r"^(?P<a>\S+):(?P<pa>\d+)\s+<->\s+(?P<b>\S+):(?P<pb>\d+)\s+"
    r"(?P<f_ba>\d+)\s+\d+\s+\S+\s+(?P<f_ab>\d+)\s+\d+\s+\S+\s+(?P<f>\d+)\s+\d+\s+\S+\s+"
    r"(?P<start>-?[\d.]+)\s+(?P<dur>-?[\d.]+)\s*$")


def conv_table(path: Path | str, proto: str) -> pd.DataFrame:
    """``tshark -q -z conv,<proto>`` parsed: one row per printed conversation, as printed.

    Columns: address_a, port_a, address_b, port_b, packets_a_to_b ("->"), packets_b_to_a
    ("<-"), packets, rel_start (string, 9 decimals), duration (string, 4 decimals).
    """
    rows = []
    for line in tshark("-r", str(path), "-q", "-z", f"conv,{proto}").splitlines():
        if "<->" not in line:
            continue
        m = _CONV_RE.match(line)
        if not m:
            raise ReferenceError(f"unexpected conv line: {line!r}")
        rows.append({"address_a": m["a"], "port_a": int(m["pa"]), "address_b": m["b"],
                     "port_b": int(m["pb"]), "packets_a_to_b": int(m["f_ab"]),
                     "packets_b_to_a": int(m["f_ba"]), "packets": int(m["f"]),
                     "rel_start": m["start"], "duration": m["dur"]})
    return pd.DataFrame(rows, columns=["address_a", "port_a", "address_b", "port_b",
                                       "packets_a_to_b", "packets_b_to_a", "packets",
                                       "rel_start", "duration"])


@functools.lru_cache(maxsize=16)
def conversation_reference(path: Path | str, proto: str, interval_ns: int = 1_000_000_000
                           ) -> pd.DataFrame:
    """One row per stream (index = tcp.stream / udp.stream), conv table + exact per-packet sums.

    A packet counts for a conversation when it carries that transport header itself (not one
    quoted inside an ICMP error: tshark's conv tap ignores those).  Side A is the source of the
    stream's first packet; the printed conv table must agree on A, frames each way and start,
    or ReferenceError says where the two views of tshark disagree.

    Exact columns: bytes_* (frame.len), payload_bytes_* (tcp.len; udp.length - 8), first_ns /
    last_ns, and peak_bps_* / peak_payload_bps_* over intervals of interval_ns aligned to the
    capture's first packet.  From the printed table: rel_start and duration (strings).
    """
    ref = packet_reference(path)
    raw, vals = ref.raw, ref.values
    outer = _outer_transport(raw["frame.protocols"])
    stream = vals[f"{proto}_stream"]
    mine = ((outer == proto) & stream.notna()).to_numpy(dtype=bool, na_value=False)
    t_ns = vals["frame_time_ns"].to_numpy("int64")
    rel_ns = np.array([epoch_ns(v) for v in raw["frame.time_relative"]], dtype=np.int64)
    payload = (vals["tcp_len"] if proto == "tcp" else vals["udp_length"] - 8)
    pk = pd.DataFrame({
        "stream": stream[mine].astype("int64").to_numpy(),
        "src": vals["ip_src"][mine].to_numpy(), "dst": vals["ip_dst"][mine].to_numpy(),
        "sport": vals[f"{proto}_srcport"][mine].to_numpy("int64"),
        "dport": vals[f"{proto}_dstport"][mine].to_numpy("int64"),
        "len": vals["frame_len"][mine].to_numpy("int64"),
        "payload": payload[mine].to_numpy("int64"),
        "t_ns": t_ns[mine], "rel_ns": rel_ns[mine],
        "bucket": rel_ns[mine] // interval_ns,
    })
    rows = []
    for s, g in pk.groupby("stream", sort=True):
        first = g.iloc[0]
        ab = ((g["src"] == first["src"]) & (g["sport"] == first["sport"])).to_numpy()
        row = {"stream": s, "proto": proto, "address_a": first["src"], "port_a": first["sport"],
               "address_b": first["dst"], "port_b": first["dport"], "packets": len(g),
               "bytes": int(g["len"].sum()), "first_ns": int(g["t_ns"].min()),
               "last_ns": int(g["t_ns"].max()), "first_rel_ns": int(first["rel_ns"])}
        for name, mask in (("a_to_b", ab), ("b_to_a", ~ab)):
            d = g[mask]
            row[f"packets_{name}"] = len(d)
            row[f"bytes_{name}"] = int(d["len"].sum())
            row[f"payload_bytes_{name}"] = int(d["payload"].sum())
            for what, col in (("peak_bps", "len"), ("peak_payload_bps", "payload")):
                per_bucket = d.groupby("bucket")[col].sum()
                row[f"{what}_{name}"] = (int(per_bucket.max()) * 8 * 1e9 / interval_ns
                                         if len(d) else 0.0)
        rows.append(row)
    per_stream = pd.DataFrame(rows).set_index("stream", drop=False)
    return _join_conv_table(per_stream, conv_table(path, proto), path, proto)


def _join_conv_table(per_stream: pd.DataFrame, conv: pd.DataFrame, path, proto) -> pd.DataFrame:
    """Attach the printed table's rel_start/duration to each stream; insist both views agree."""
    if per_stream.empty and conv.empty:
        return per_stream.assign(rel_start=pd.Series(dtype=str), duration=pd.Series(dtype=str))
    per_stream = per_stream.assign(rel_start=[_fmt9(ns) for ns in per_stream["first_rel_ns"]])
    key = ["address_a", "port_a", "address_b", "port_b", "rel_start"]
    joined = per_stream.merge(conv, on=key, how="outer", suffixes=("", "_conv"), indicator=True)
    lonely = joined[joined["_merge"] != "both"]
    if len(lonely):
        raise ReferenceError(
            f"{path}: conv,{proto} rows and per-packet tcp/udp.stream groups do not match "
            f"one to one:\n{lonely[key + ['_merge']].to_string()}")
    for col in ("packets", "packets_a_to_b", "packets_b_to_a"):
        bad = joined[joined[col] != joined[f"{col}_conv"]]
        if len(bad):
            raise ReferenceError(f"{path}: conv,{proto} {col} disagrees with the per-packet "
                                 f"pass:\n{bad[key + [col, col + '_conv']].to_string()}")
    joined = joined.drop(columns=[c for c in joined if c.endswith("_conv") or c == "_merge"])
    return joined.set_index("stream", drop=False).sort_index()


def _fmt9(ns: int) -> str:
    """Nanoseconds as tshark prints relative times: seconds with 9 decimals."""
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


# -- TCP sequence analysis (tcp.analysis.*) ------------------------------------------------------

TCP_ANALYSIS_PREFS = ("-o", "ip.defragment:FALSE", "-o", "ipv6.defragment:FALSE",
                      "-o", "tcp.analyze_sequence_numbers:TRUE",
                      "-o", "tcp.relative_sequence_numbers:TRUE")
# pcapstats.analyses.tcp_analysis column -> the tshark field it equals.
TCP_ANALYSIS_FIELDS = {
    "frame_number": "frame.number", "stream": "tcp.stream", "tcp_len": "tcp.len",
    "tcp_seq": "tcp.seq", "tcp_ack": "tcp.ack", "tcp_nxtseq": "tcp.nxtseq",
    "tcp_window_size": "tcp.window_size",
    "window_size_scalefactor": "tcp.window_size_scalefactor",
    **{flag: f"tcp.analysis.{flag}" for flag in (
        "retransmission", "fast_retransmission", "spurious_retransmission", "out_of_order",
        "lost_segment", "ack_lost_segment", "duplicate_ack", "zero_window", "zero_window_probe",
        "zero_window_probe_ack", "window_full", "keep_alive", "keep_alive_ack", "window_update",
        "reused_ports")},
    "duplicate_ack_num": "tcp.analysis.duplicate_ack_num",
    "duplicate_ack_frame": "tcp.analysis.duplicate_ack_frame",
    "bytes_in_flight": "tcp.analysis.bytes_in_flight",
    "push_bytes_sent": "tcp.analysis.push_bytes_sent",
    "acks_frame": "tcp.analysis.acks_frame", "ack_rtt_ns": "tcp.analysis.ack_rtt",
    "initial_rtt_ns": "tcp.analysis.initial_rtt", "rto_ns": "tcp.analysis.rto",
    "rto_frame": "tcp.analysis.rto_frame",
}
TCP_ANALYSIS_FLAGS = tuple(c for c, f in TCP_ANALYSIS_FIELDS.items()
                           if f.startswith("tcp.analysis.") and c.replace("_", "").isalpha()
                           and not c.endswith(("_num", "_frame", "_ns", "_sent", "_flight")))


@functools.lru_cache(maxsize=16)
def tcp_analysis_reference(path: Path | str) -> pd.DataFrame:
    """tshark's sequence analysis of every TCP packet that is not inside an ICMP error, in the
    column names of pcapstats.analyses.tcp_analysis: flags as bools (field present), numbers
    as Int64 (<NA> where tshark prints none), times (``*_ns``) as exact integer ns."""
    fields = tuple(TCP_ANALYSIS_FIELDS.values()) + ("frame.protocols", "tcp.hdr_len")
    args = ["-n", *TCP_ANALYSIS_PREFS, "-r", str(path), "-T", "fields", "-E", "separator=/t",
            "-E", "occurrence=f", "-E", "quote=n"]
    for f in fields:
        args += ["-e", f]
    proc = subprocess.run(["tshark", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"tshark failed on {path}: {proc.stderr.strip()}")
    rows = [line.split("\t") for line in proc.stdout.splitlines()]
    raw = pd.DataFrame(rows, columns=list(fields), dtype="string").replace("", pd.NA)
    own_tcp = (_outer_transport(raw["frame.protocols"]) == "tcp").to_numpy(bool, na_value=False)
    raw = raw[own_tcp & (_int(raw["tcp.hdr_len"]) >= 20).to_numpy(bool, na_value=False)]
    out = {}
    for col, field in TCP_ANALYSIS_FIELDS.items():
        if col in TCP_ANALYSIS_FLAGS:
            out[col] = raw[field].notna().to_numpy()
        elif col.endswith("_ns"):
            out[col] = pd.array([pd.NA if v is pd.NA else epoch_ns(v) for v in raw[field]],
                                dtype="Int64")
        else:
            out[col] = pd.array(_int(raw[field]), dtype="Int64")
    return pd.DataFrame(out)
