"""The iperf3 rules (facts from esnet/iperf; see the package docstring): the control
connection's message sequence, its data connections (cookie, parallel count, bytes between
what was read and what was written) and UDP data streams (connect message, reply, counters)."""

from __future__ import annotations

import re

import numpy as np

from ... import schema
from ...streams import id_ranges
from ...addresses import endpoint
from .checks import (CANNOT_TELL, FAIL, PASS, Context, StreamVerdict, json_message,
                     payload, text)

COOKIE_BYTES = 37
STATES = {1: "TEST_START", 2: "TEST_RUNNING", 4: "TEST_END", 9: "PARAM_EXCHANGE",
          10: "CREATE_STREAMS", 13: "EXCHANGE_RESULTS", 14: "DISPLAY_RESULTS", 16: "IPERF_DONE"}
PARAM_EXCHANGE = bytes([9])   # the server's first byte on a control connection
# On the wire (iperf.h writes 0x36373839 / 0x39383736 in host order: these are the bytes a
# little-endian host sends; big-endian hosts swap the constants so the bytes are the same).
UDP_CONNECT, UDP_REPLY = b"9876", b"6789"
UDP_LEGACY_REPLY = (987654321).to_bytes(4, "little")
_COOKIE_RE = re.compile(rb"[a-z0-9]{36}\x00")


def is_cookie(head: bytes | None) -> bool:
    """A client's first 37 bytes are an iperf3 cookie (control and data connections send one;
    the server of a control connection answers PARAM_EXCHANGE)."""
    return head is not None and _COOKIE_RE.fullmatch(head) is not None


def check(ctx: Context, controls: list[int], data: list[int]) -> None:
    """The iperf3 rules on its control connections and their data streams (TCP or UDP)."""
    by_cookie: dict[bytes, list[int]] = {}
    for s in data:
        c = ctx.client_dir(s)
        by_cookie.setdefault(ctx.head(s, c, COOKIE_BYTES), []).append(s)
    for s in controls:
        c = ctx.client_dir(s)
        cookie = ctx.head(s, c, COOKIE_BYTES)
        v = StreamVerdict(s, "tcp", "iperf3-control", *ctx.endpoints(s, c))
        ctx.out.append(v)
        _cookie(ctx, v, s, c, cookie, "37-byte cookie first")
        params, results = _control(ctx, v, s, c)
        streams = by_cookie.pop(cookie, []) if is_cookie(cookie) else []
        udp = bool(params and params.get("udp"))
        if udp or params is None:
            _udp(ctx, v, params or {}, results)
        elif params:
            _parallel(v, int(params.get("parallel", 1)), "tcp", streams)
        for d in streams:
            ctx.out.append(_data(ctx, d, cookie, params, results))
    for cookie, streams in by_cookie.items():
        for d in streams:
            c = ctx.client_dir(d)
            v = StreamVerdict(d, "tcp", "iperf3-data", *ctx.endpoints(d, c))
            if is_cookie(cookie):
                v.add("cookie", CANNOT_TELL, "the cookie of a control connection",
                      f"{text(cookie)}: no control connection with it in the capture")
            else:
                _cookie(ctx, v, d, c, cookie, "the cookie of a control connection")
            ctx.out.append(v)


def _cookie(ctx, v, s, c, cookie, expected) -> None:
    """The cookie check of a stream taken as iperf3 (by its cookie, or because --app /
    --port said so: then its first bytes may be anything)."""
    if is_cookie(cookie):
        v.add("cookie", PASS, expected, f"{text(cookie)}")
    elif cookie is None:
        v.add("cookie", CANNOT_TELL, expected, "the first bytes are not in the capture")
    else:
        frame = ctx.r.first_frame_carrying(s, c, 0)
        v.add("cookie", FAIL, expected, f"{text(cookie)}: not 36 characters of [a-z0-9] and "
              "a NUL", (frame,) if frame else (), 0)


def _control(ctx, v, s, c) -> tuple[dict | None, dict | None]:
    """Parse both directions of the control connection; checks its message sequence."""
    fc, fs = ctx.r.flow(s, c), ctx.r.flow(s, 1 - c)
    params = results = server_results = None
    cl = ctx.head(s, c, fc["seen_end"]) if fc else None
    sv = ctx.head(s, 1 - c, fs["seen_end"]) if fs else None
    if cl is None or sv is None:
        v.add("messages", CANNOT_TELL, "cookie, parameters, TEST_END, results, IPERF_DONE",
              "the control connection's bytes are not all captured")
        return None, {}
    try:
        at = COOKIE_BYTES
        params, at = json_message(cl, at)
        client_states, results = _states(cl, at, 4)     # TEST_END: its results follow
        expect_client = [4, 16]
        ok_client = client_states == expect_client
        v.add("client_messages", PASS if ok_client else FAIL,
              "cookie, parameters (JSON), TEST_END, results (JSON), IPERF_DONE",
              "cookie, parameters, " + ", ".join(
                  _state(x) + (", results" if x == 4 and results else "")
                  for x in client_states))
        server_states, server_results = _states(sv, 0, 13)   # EXCHANGE_RESULTS: its results
        expect_server = [9, 10, 1, 2, 13, 14]
        v.add("server_messages", PASS if server_states == expect_server else FAIL,
              ", ".join(_state(x) for x in expect_server) + " (results after "
              "EXCHANGE_RESULTS)", ", ".join(_state(x) for x in server_states))
    except ValueError as e:
        v.add("messages", FAIL, "length-prefixed JSON where the protocol puts it", str(e))
        return params, {}
    return params, {"client": results, "server": server_results}


def _states(data: bytes, at: int, results_after: int) -> tuple[list[int], dict | None]:
    """The state bytes one side of the control connection sent from ``at`` on, and the JSON
    message that follows its ``results_after`` state (its results; None when it sent none)."""
    states, results = [], None
    while at < len(data):
        state = data[at]
        states.append(state)
        at += 1
        if state == results_after:
            results, at = json_message(data, at)
    return states, results


def _data(ctx, s, cookie, params, results) -> StreamVerdict:
    c = ctx.client_dir(s)
    v = StreamVerdict(s, "tcp", "iperf3-data", *ctx.endpoints(s, c))
    v.add("cookie", PASS, "the control connection's cookie first", text(cookie))
    if not params:
        return v
    reverse = bool(params.get("reverse"))
    sender = 1 - c if reverse else c
    f = ctx.r.flow(s, sender) or {"seen_end": 0, "captured_bytes": 0}
    wire = f["seen_end"] - (COOKIE_BYTES if sender == c else 0)
    results = results or {}
    sent = _stream_bytes(results.get("server" if reverse else "client"))
    got = _stream_bytes(results.get("client" if reverse else "server"))
    expected = ("bytes after the cookie between what the receiver read and what the sender "
                "wrote (results of the same stream)")
    if params.get("bidirectional"):
        v.add("bytes", CANNOT_TELL, expected, "bidirectional test: not checked")
    elif params.get("omit"):
        v.add("bytes", CANNOT_TELL, expected, f"omit {params['omit']} s: results leave "
              "the omitted bytes out")
    elif not sent or len(sent) != len(got):
        v.add("bytes", CANNOT_TELL, expected, "the results were not captured")
    else:
        ok = any(r <= wire <= w for w, r in zip(sent, got))
        v.add("bytes", PASS if ok else FAIL, expected, f"{wire} bytes; written/read per "
              "stream: " + ", ".join(f"{w}/{r}" for w, r in zip(sent, got)))
    ends = {k: (ctx.r.flow(s, d) or {}).get(k + "_frame", 0) for d in (c, 1 - c)
            for k in ("fin", "rst")}
    v.evidence.append("ended by " + ", ".join(f"{k.upper()} frame {f}" for k, f in
                                              ends.items() if f) if any(ends.values())
                      else "end not captured")
    return v


def _udp(ctx, v, params, results) -> None:
    """UDP data streams on the control connection's server port."""
    cap = ctx.cap
    udp = cap.layer(schema.UDP) & ~cap.column("l4_quoted").astype(bool)
    server_port = int(v.server.rsplit(":", 1)[1])
    rows = np.flatnonzero(udp & ((cap.column("udp_dstport") == server_port)
                                 | (cap.column("udp_srcport") == server_port)))
    streams = np.unique(cap.column("udp_stream")[rows]).tolist()
    found, verdicts = [], []
    reported = sorted(int(x["packets"]) for x in
                      ((results or {}).get("client") or {}).get("streams", []))
    for u in streams:
        mine = rows[cap.column("udp_stream")[rows] == u]
        to_server = cap.column("udp_dstport")[mine] == server_port
        first = payload(cap, ctx.r.buf, mine[:1], 4)
        if first is None or first[0] != UDP_CONNECT:
            continue
        found.append(u)
        src_row = mine[0]
        client = endpoint(cap.addresses[cap.column("ip_src")[src_row]],
                           cap.column("udp_srcport")[src_row])
        sv = StreamVerdict(u, "udp", "iperf3-data", client, v.server)
        sv.add("connect", PASS, "4-byte connect message '9876' first",
               f"frame {int(cap.column('frame_number')[src_row])}")
        back = mine[~to_server]
        reply = payload(cap, ctx.r.buf, back[:1], 4)
        if reply is None or reply[0] not in (UDP_REPLY, UDP_LEGACY_REPLY):
            sv.add("reply", FAIL if reply is not None else CANNOT_TELL,
                   "the server's reply '6789'",
                   "none captured" if reply is None else text(reply[0]))
        else:
            sv.add("reply", PASS, "the server's reply '6789'",
                   f"frame {int(cap.column('frame_number')[back[0]])}")
        data = mine[to_server][1:]
        width = 8 if params.get("udp_counters_64bit") else 4
        heads = payload(cap, ctx.r.buf, data, 8 + width)
        if not params:
            sv.add("sequence", CANNOT_TELL, "packet counts 1..n", "the control "
                   "connection's parameters were not captured: counter width unknown")
        elif heads is None:
            sv.add("sequence", CANNOT_TELL, "packet counts 1..n", "payload not captured")
        else:
            seq = np.array([int.from_bytes(h[8:8 + width], "big") for h in heads], np.int64)
            dup = len(seq) - len(np.unique(seq))
            top = int(seq.max()) if len(seq) else 0
            sent_here = bool(schema.sent_here(cap.column("ip_ttl")[data]).all())
            expected = ("packet counts 1..n, each once, n = the client's reported packets"
                        + ("" if sent_here else " (past the sender the last may be lost: "
                           "n at most, as iperf3's server counts)"))
            ok = dup == 0 and (not reported or top in reported
                               or (not sent_here and top < max(reported)))
            sv.add("sequence", PASS if ok else FAIL, expected,
                   f"{len(seq)} datagrams, counts up to {top}, {dup} duplicate(s); "
                   f"reported {', '.join(map(str, reported)) or 'nothing'}")
            sv.evidence.append(f"{top - len(np.unique(seq))} count(s) missing before the "
                               "capture point (lost on the way, or not captured)")
        ctx.out.append(sv)
        verdicts.append(sv)
    reports = ((results or {}).get("server") or {}).get("streams") or []
    if len(reports) == len(verdicts):      # the server's streams in the order they began
        for sv, r in zip(verdicts, reports):
            sv.facts["iperf3_server"] = {"packets": r.get("packets"),
                                         "lost_packets": r.get("errors"),
                                         "jitter_ms": r.get("jitter", 0) * 1e3
                                         if r.get("jitter") is not None else None}
    if params:
        _parallel(v, int(params.get("parallel", 1)), "udp", found)


def _stream_bytes(results: dict | None) -> list[int]:
    return [int(x["bytes"]) for x in (results or {}).get("streams", [])]


def _parallel(v: StreamVerdict, want: int, proto: str, found: list[int]) -> None:
    v.add("parallel", PASS if len(found) == want else FAIL,
          f"{want} data stream(s) (the parameters' parallel)",
          f"{len(found)}: {proto} streams {id_ranges(found)}")


def _state(x: int) -> str:
    return STATES.get(x, f"unknown state {x}")
