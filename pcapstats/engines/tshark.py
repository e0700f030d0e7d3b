"""The reference engine: the packet table as tshark dissects it (``--engine tshark``).

Slow (tshark does a full dissection) but independent of our reader, so it serves as a
cross-check, and it decodes link types the fast reader does not (PPP, USB, PPI ...) and what the
fast reader leaves out of 802.11 frames (A-MSDU subframes, non-standard encapsulations).
Fields come from ``tshark -T fields`` with the Wireshark names in pcapstats.schema; options:
``ip.defragment:FALSE`` (pcapstats does not reassemble) and raw sequence numbers.

Differences from the fast engine, by construction: no file offsets (``frame_offset``,
``payload_offset`` are -1, ``payload_cap_len`` 0); ``link_type`` is mapped back from tshark's
encapsulation for the common types only (else 65535); for IPv6, ``ip_hdr_len`` counts only the
fixed 40 bytes.  The transport layer of a packet is the first TCP/UDP/ICMP after its first IP
header, so the quoted header inside an ICMP error is not taken for the packet's own.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess

import numpy as np
import pandas as pd

from .. import schema
from ..capture import Capture
from ..errors import EngineError
from ..ingest.source import open_source

_ENCAP_TO_LINKTYPE = {"1": 1, "25": 113, "7": 101, "15": 0, "210": 276, "225": 276, "20": 105,
                      "23": 127}
_V6_EXT = ("hopopts", "dstopts", "routing")
_EXTRA = ["frame.protocols", "frame.encap_type", "ipv6.plen", "ipv6.nxt", "tcp.options.sack_le",
          "tcp.options.sack_re", "tcp.options.sack_perm", *(f"ipv6.{e}.len_oct" for e in _V6_EXT)]


def tshark_fields() -> list[str]:
    """Every Wireshark field the schema names, plus the few the engine needs to interpret them."""
    out = []
    for c in schema.COLUMNS:
        if c.wireshark:
            out.extend(f for f in c.wireshark.split("|") if f not in out)
    return out + [f for f in _EXTRA if f not in out]


def read_tshark(path) -> Capture:
    exe = shutil.which("tshark")
    if exe is None:
        raise EngineError("tshark is not installed", hint="apt-get install tshark, or use --engine fast")
    with open_source(path) as src:  # same open errors as the fast engine; size for the record
        size, compressed, path = src.file_size, src.compressed, src.path
    fields = tshark_fields()
    cmd = [exe, "-n", "-r", path, "-o", "ip.defragment:FALSE", "-o", "ipv6.defragment:FALSE",
           "-o", "tcp.relative_sequence_numbers:FALSE", "-T", "fields", "-E", "separator=/t",
           "-E", "occurrence=a", "-E", "aggregator=,"]
    for f in fields:
        cmd += ["-e", f]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
    if proc.returncode != 0:
        msg = " ".join(line for line in proc.stderr.splitlines() if "Running as user" not in line)
        raise EngineError(f"tshark failed: {msg.strip() or 'exit ' + str(proc.returncode)}", path=path)
    from io import StringIO
    raw = pd.read_csv(StringIO(proc.stdout), sep="\t", header=None, names=fields, dtype=str,
                      keep_default_na=False, quoting=3)
    return _to_capture(raw, path, size, compressed)


def _first(col: pd.Series) -> pd.Series:
    return col.str.split(",", n=1).str[0]


def _num(col: pd.Series, dtype="int64", base=10) -> tuple[np.ndarray, np.ndarray]:
    """(values, present) from a text column; empty cells are absent.  tshark prints some fields
    in hex (ip.id, tcp.flags, icmpv6.echo.identifier): those are parsed as such."""
    s = _first(col)
    present = (s != "").to_numpy()
    vals = np.zeros(len(s), dtype)
    if present.any():
        text = s[present]
        if base != 10 or text.str.startswith("0x").any():
            vals[present] = [int(v, 0) for v in text]
        else:
            vals[present] = text.astype("int64").to_numpy().astype(dtype)
    return vals, present


def _pick(raw, names: str, dtype="int64", base=10):
    """First non-empty of the "a|b" variants."""
    vals, present = None, None
    for name in names.split("|"):
        v, p = _num(raw[name], dtype, base)
        if vals is None:
            vals, present = v, p
        else:
            vals = np.where(present, vals, v)
            present = present | p
    return vals, present


def _to_capture(raw: pd.DataFrame, path: str, size: int, compressed: bool) -> Capture:
    n = len(raw)
    a: dict[str, np.ndarray] = {}
    epoch = _first(raw["frame.time_epoch"])
    parts = epoch.str.split(".", n=1, expand=True).reindex(columns=[0, 1], fill_value="0")
    sec = parts[0].astype("int64").to_numpy()
    frac = parts[1].fillna("0").str.ljust(9, "0").str[:9].astype("int64").to_numpy()
    ts = sec * 10**9 + np.where(sec < 0, -frac, frac)
    a["frame_number"] = np.arange(1, n + 1, dtype=np.uint32)
    a["frame_time_ns"] = ts
    a["frame_time_epoch"] = ts / 1e9
    a["frame_time_relative"] = (ts - ts[0]) / 1e9 if n else np.zeros(0)
    a["frame_len"] = _num(raw["frame.len"], "uint32")[0]
    a["frame_cap_len"] = _num(raw["frame.cap_len"], "uint32")[0]
    a["frame_interface_id"] = _num(raw["frame.interface_id"], "uint32")[0]
    a["link_type"] = _first(raw["frame.encap_type"]).map(_ENCAP_TO_LINKTYPE).fillna(65535) \
        .astype("uint16").to_numpy()
    vlan, vlan_present = _pick(raw, "ieee8021ad.id|vlan.id", "uint16")
    a["vlan_id"] = vlan
    tags = raw["ieee8021ad.id"].str.cat(raw["vlan.id"], sep=",").str.strip(",")
    a["vlan_count"] = tags.map(lambda s: s.count(",") + 1 if s else 0).astype("uint8").to_numpy()
    a["frame_offset"] = np.full(n, -1, np.int64)

    # transport of the packet itself: first tcp/udp/icmp token after its first ip/ipv6 token
    l4name = raw["frame.protocols"].str.extract(
        r"(?:^|:)(?:ip|ipv6)(?::(?!tcp|udp|icmp|icmpv6)[^:]+)*:(tcp|udp|icmp|icmpv6)(?::|$)")[0]
    l4name = l4name.fillna("").to_numpy()
    tcp, udp, icmp = l4name == "tcp", l4name == "udp", (l4name == "icmp") | (l4name == "icmpv6")
    # an ICMP error's quoted TCP/UDP header: its fields are shown, flagged l4_quoted (schema.py)
    quoted_tcp = icmp & (_first(raw["tcp.srcport"]) != "").to_numpy()
    quoted_udp = icmp & (_first(raw["udp.srcport"]) != "").to_numpy()
    a["l4_quoted"] = quoted_tcp | quoted_udp
    own_tcp, own_udp = tcp, udp
    tcp, udp = tcp | quoted_tcp, udp | quoted_udp

    ver, ip = _pick(raw, "ip.version|ipv6.version", "uint8")
    a["ip_version"] = ver
    addresses, src_codes, dst_codes = _addresses(raw, ip)
    a["ip_src"], a["ip_dst"] = src_codes, dst_codes
    v6 = ver == 6
    hdr = _num(raw["ip.hdr_len"], "uint16")[0]
    a["ip_hdr_len"] = np.where(v6, 40 + _v6_extension_bytes(raw), hdr).astype(np.uint16)
    iplen = _num(raw["ip.len"], "uint32")[0]
    plen = _num(raw["ipv6.plen"], "uint32")[0]
    a["ip_len"] = np.where(v6, plen + 40, iplen).astype(np.uint32)
    proto4 = _num(raw["ip.proto"], "uint8")[0]
    nxt6 = _num(raw["ipv6.nxt"], "uint8")[0]
    proto6 = np.select([own_tcp, own_udp, icmp], [6, 17, 58], nxt6.astype(np.int64))
    a["ip_proto"] = np.where(v6, proto6, proto4).astype(np.uint8)
    a["ip_ttl"] = _pick(raw, "ip.ttl|ipv6.hlim", "uint8")[0]
    a["ip_id"] = _pick(raw, "ip.id|ipv6.fraghdr.ident", "uint32", 16)[0]
    a["ip_flags_df"] = _num(raw["ip.flags.df"], "uint8")[0] == 1
    mf = _pick(raw, "ip.flags.mf|ipv6.fraghdr.more", "uint8")[0]
    a["ip_flags_mf"] = mf == 1
    fo = _pick(raw, "ip.frag_offset|ipv6.fraghdr.offset", "uint16")[0]
    a["ip_frag_offset"] = fo
    a["ip_fragment"] = a["ip_flags_mf"] | (fo > 0)

    for col in schema.COLUMNS:  # the transport columns named after one field each
        if col.name in a or not col.wireshark or col.layer not in (
                schema.TCP, schema.UDP, schema.ICMP, schema.ICMP_ECHO, schema.TCP_OPT_MSS,
                schema.TCP_OPT_WS, schema.TCP_OPT_TS):
            continue
        base = 16 if col.name == "tcp_flags" else 10
        a[col.name] = _pick(raw, col.wireshark, "int64", base)[0].astype(schema.numpy_dtype(col))
    opts = {name: _num(raw[f], "int64")[1] & tcp for name, f in (
        (schema.TCP_OPT_MSS, "tcp.options.mss_val"), (schema.TCP_OPT_WS, "tcp.options.wscale.shift"),
        (schema.TCP_OPT_TS, "tcp.options.timestamp.tsval"))}
    a["tcp_option_sack_perm"] = (raw["tcp.options.sack_perm"] != "").to_numpy() & tcp
    le = raw["tcp.options.sack_le"].str.split(",")
    re_ = raw["tcp.options.sack_re"].str.split(",")
    count = le.map(lambda x: len([v for v in x if v])).to_numpy() * tcp
    a["tcp_sack_count"] = np.minimum(count, 4).astype(np.uint8)
    for k in range(1, 5):
        a[f"tcp_sack_le{k}_raw"] = le.map(lambda x: int(x[k - 1]) if len(x) >= k and x[k - 1] else 0) \
            .astype("uint32").to_numpy()
        a[f"tcp_sack_re{k}_raw"] = re_.map(lambda x: int(x[k - 1]) if len(x) >= k and x[k - 1] else 0) \
            .astype("uint32").to_numpy()
    a["tcp_stream"] = np.where(tcp, a["tcp_stream"], -1)
    a["udp_stream"] = np.where(udp, a["udp_stream"], -1)
    udp_payload = np.maximum(a["udp_length"].astype(np.int64) - 8, 0)
    icmp_payload = np.maximum(a["ip_len"].astype(np.int64) - a["ip_hdr_len"] - 8, 0)
    a["payload_offset"] = np.full(n, -1, np.int64)
    a["payload_len"] = np.select([own_tcp, own_udp, icmp], [a["tcp_len"], udp_payload, icmp_payload], 0) \
        .astype(np.uint32)
    a["payload_cap_len"] = np.zeros(n, np.uint32)

    # radiotap: the first occurrence of each field (schema.py), absent where the header has none
    signal, has_signal = _num(raw["radiotap.dbm_antsignal"], "int64")
    a["radiotap_dbm_antsignal"] = signal.astype(np.int8)
    rate = _first(raw["radiotap.datarate"])
    has_rate = (rate != "").to_numpy()
    a["radiotap_datarate"] = np.where(has_rate, pd.to_numeric(rate.where(has_rate, "0")), 0.0)
    freq, has_freq = _num(raw["radiotap.channel.freq"], "uint16")
    a["radiotap_channel_freq"] = freq
    # the 802.11 frame control, where tshark dissects its flags (protocol version 0)
    retry = _first(raw["wlan.fc.retry"])
    has_wlan = (retry != "").to_numpy()
    a["wlan_fc_retry"] = retry.isin(["1", "True"]).to_numpy()
    a["wlan_fc_type"] = np.where(has_wlan, _num(raw["wlan.fc.type"], "uint8")[0], 0) \
        .astype(np.uint8)
    a["wlan_fc_ds"] = _num(raw["wlan.fc.ds"], "uint8")[0]

    echo = icmp & _pick(raw, "icmp.ident|icmpv6.echo.identifier", "int64")[1]
    layers = {schema.VLAN: vlan_present, schema.IP: ip, schema.TCP: tcp, schema.UDP: udp,
              schema.ICMP: icmp, schema.ICMP_ECHO: echo, **opts,
              schema.TCP_OPT_SACK_PERM: a["tcp_option_sack_perm"], schema.RADIOTAP_SIGNAL: has_signal,
              schema.RADIOTAP_RATE: has_rate, schema.RADIOTAP_CHANNEL: has_freq,
              schema.WLAN: has_wlan}
    for k, layer in enumerate((schema.TCP_SACK1, schema.TCP_SACK2, schema.TCP_SACK3,
                               schema.TCP_SACK4), start=1):
        layers[layer] = a["tcp_sack_count"] >= k
    return Capture(path=path, format="tshark", compressed=compressed, file_size=size,
                   interfaces=[], arrays=a, layers=layers, addresses=addresses, engine="tshark",
                   kernel="tshark")


def _v6_extension_bytes(raw) -> np.ndarray:
    """Bytes of the IPv6 extension headers of each packet's own (first) IPv6 header."""
    total = np.zeros(len(raw), np.int64)
    for e in _V6_EXT:
        total += _num(raw[f"ipv6.{e}.len_oct"])[0]
    total += 8 * (_first(raw["ipv6.fraghdr.offset"]) != "").to_numpy()
    return total


def _addresses(raw, ip):
    src = np.where(_first(raw["ip.src"]) != "", _first(raw["ip.src"]), _first(raw["ipv6.src"]))
    dst = np.where(_first(raw["ip.dst"]) != "", _first(raw["ip.dst"]), _first(raw["ipv6.dst"]))
    both = pd.Series(np.concatenate([src, dst])).map(
        lambda s: str(ipaddress.ip_address(s)) if s else None)
    codes, uniq = pd.factorize(both)
    codes = codes.astype(np.int32)
    n = len(src)
    src_codes, dst_codes = codes[:n], codes[n:]
    src_codes = np.where(ip, src_codes, -1).astype(np.int32)
    dst_codes = np.where(ip, dst_codes, -1).astype(np.int32)
    return np.asarray(uniq, dtype=object), src_codes, dst_codes

