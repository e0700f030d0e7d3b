"""Bytes to packet table: open (mmap / gunzip), walk records, decode fields, number streams.

``read(path)`` is the whole path of the fast engine; every step is vectorised or in the kernel,
no Python object is made per packet.
"""

from __future__ import annotations

import ipaddress
import warnings

import numpy as np

from .. import schema
from ..capture import Capture
from ..errors import SkippedPacketsWarning
from ..streams import tcp_streams, udp_streams
from . import formats
from . import kernel as K
from .linktypes import linktype_name
from .source import open_source


def read_fast(path, kernel: str = "auto") -> Capture:
    kern = K.get_kernel(kernel)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with open_source(path) as src:
            walked = formats.walk(src.buf, src.path, kern)
            rec = walked.records
            out = kern.decode(src.buf, rec.data_off, rec.caplen, rec.origlen, walked.linktype)
            cap = _build(src, walked, out, kern)
    cap.warnings.extend(str(w.message) for w in caught)
    for w in caught:  # re-emit for the caller's own filters
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return cap


def _build(src, walked: formats.Walked, out: dict, kern) -> Capture:
    rec = walked.records
    n = len(rec.data_off)
    status = out["status"]
    _warn_skipped(status, walked.linktype, src.path)

    ip = out["ip_version"] > 0
    src_codes, dst_codes, addr16, addr_v6 = kern.intern_addresses(out["ip_version"], out["ip_src"],
                                                                  out["ip_dst"])
    addresses = np.array([_format_address(bytes(a), bool(v)) for a, v in zip(addr16, addr_v6)],
                         dtype=object)
    del out["ip_src"], out["ip_dst"]
    l4, opts, flags = out["l4"], out["tcp_opts"], out["ip_flags"]
    conv, reverse, first = kern.conversations(l4, src_codes, dst_codes, out["srcport"], out["dstport"])
    tcp, udp = l4 == K.L4_TCP, l4 == K.L4_UDP
    ts = rec.ts.astype(np.int64, copy=False)

    a: dict[str, np.ndarray] = {
        "frame_number": np.arange(1, n + 1, dtype=np.uint32),
        "frame_time_ns": ts,
        "frame_time_epoch": ts / 1e9,
        "frame_time_relative": (ts - ts[0]) / 1e9 if n else np.zeros(0),
        "frame_len": rec.origlen, "frame_cap_len": rec.caplen,
        "frame_interface_id": walked.interface_id, "link_type": walked.linktype,
        "vlan_id": out["vlan_id"], "vlan_count": out["vlan_count"], "frame_offset": rec.data_off,
        "ip_version": out["ip_version"], "ip_src": src_codes, "ip_dst": dst_codes,
        "ip_hdr_len": out["ip_hdr_len"], "ip_len": out["ip_len"], "ip_proto": out["ip_proto"],
        "ip_ttl": out["ip_ttl"], "ip_id": out["ip_id"],
        "ip_flags_df": (flags & K.IPF_DF) != 0, "ip_flags_mf": (flags & K.IPF_MF) != 0,
        "ip_frag_offset": out["ip_frag_offset"], "ip_fragment": (flags & K.IPF_FRAGMENT) != 0,
        "tcp_srcport": out["srcport"], "tcp_dstport": out["dstport"],
        "tcp_seq_raw": out["tcp_seq"], "tcp_ack_raw": out["tcp_ack"],
        "tcp_hdr_len": out["tcp_hdr_len"], "tcp_flags": out["tcp_flags"],
        "tcp_window_size_value": out["tcp_win"], "tcp_len": out["payload_len"],
        "tcp_option_mss": out["tcp_mss"], "tcp_option_wscale_shift": out["tcp_ws"],
        "tcp_option_sack_perm": (opts & K.OPT_SACK_PERM) != 0,
        "tcp_option_tsval": out["tcp_tsval"], "tcp_option_tsecr": out["tcp_tsecr"],
        "tcp_sack_count": out["tcp_sack_count"],
        "udp_srcport": out["srcport"], "udp_dstport": out["dstport"], "udp_length": out["udp_length"],
        "icmp_type": out["icmp_type"], "icmp_code": out["icmp_code"],
        "icmp_ident": out["icmp_ident"], "icmp_seq": out["icmp_seq"],
        "payload_offset": out["payload_off"], "payload_len": out["payload_len"],
        "payload_cap_len": out["payload_cap_len"],
    }
    sack = out["tcp_sack"]
    for k in range(1, 5):
        a[f"tcp_sack_le{k}_raw"] = sack[:, 2 * k - 2]
        a[f"tcp_sack_re{k}_raw"] = sack[:, 2 * k - 1]
    a["tcp_stream"] = _stream_column(tcp, tcp_streams, conv, reverse, first, out["tcp_flags"],
                                     out["tcp_seq"], out["tcp_ack"])
    a["udp_stream"] = _stream_column(udp, udp_streams, conv)

    layers = {
        schema.VLAN: out["vlan_count"] > 0, schema.IP: ip, schema.TCP: tcp, schema.UDP: udp,
        schema.ICMP: l4 == K.L4_ICMP, schema.ICMP_ECHO: out["icmp_echo"] != 0,
        schema.TCP_OPT_MSS: (opts & K.OPT_MSS) != 0, schema.TCP_OPT_WS: (opts & K.OPT_WS) != 0,
        schema.TCP_OPT_SACK_PERM: (opts & K.OPT_SACK_PERM) != 0,
        schema.TCP_OPT_TS: (opts & K.OPT_TS) != 0,
    }
    for k, layer in enumerate((schema.TCP_SACK1, schema.TCP_SACK2, schema.TCP_SACK3,
                               schema.TCP_SACK4), start=1):
        layers[layer] = out["tcp_sack_count"] >= k
    return Capture(path=src.path, format=walked.format, compressed=src.compressed,
                   file_size=src.file_size, interfaces=walked.interfaces, arrays=a, layers=layers,
                   addresses=addresses, engine="fast", kernel=kern.name,
                   warnings=[])


def _stream_column(mask, numbering, *per_packet) -> np.ndarray:
    """Stream ids of the masked packets, -1 elsewhere (no gather when every packet qualifies)."""
    count = int(np.count_nonzero(mask))
    if count == len(mask):
        return numbering(*per_packet).astype(np.int64, copy=False)
    col = np.full(len(mask), -1, np.int64)
    if count:
        idx = np.flatnonzero(mask)
        col[idx] = numbering(*(p[idx] for p in per_packet))
    return col


def _format_address(raw16: bytes, v6: bool) -> str:
    return str(ipaddress.IPv6Address(raw16)) if v6 else str(ipaddress.IPv4Address(raw16[:4]))


def _warn_skipped(status, linktype, path) -> None:
    unknown = status == K.DS_UNKNOWN_LINKTYPE
    if unknown.any():
        types, counts = np.unique(linktype[unknown], return_counts=True)
        first = int(np.flatnonzero(unknown)[0]) + 1
        what = ", ".join(f"{c} of link type {t} ({linktype_name(int(t))})" for t, c in zip(types, counts))
        warnings.warn(SkippedPacketsWarning(
            f"{int(unknown.sum())} packets counted but not decoded: {what}", path=path,
            packet=first, hint="`--engine tshark` decodes every link type tshark knows"))
