"""Achieved against asked: what a lab run or a capture made of the impairment it was asked --
rate, one-way delay, loss, queue limit -- measured from what it captured and from its own
counters, each judged against a tolerance stated here.  The sidecar's ``achieved``.

A lab run (:func:`lab_run`) has a capture before the path (the sender's side) and one after it
(the receiver's side): its own files where ``--capture`` put them there, else a headers-only
capture of the lab's own, not kept.  The hosts share one clock, so a packet seen at both is
timed across the path: its one-way delay.  Packets are matched by IPv4 addresses, protocol,
identification and fragment offset (the latest sending at or before the arrival; an
identification of 0 is left out, Linux gives it to many packets).  Then, per direction:

- **rate**: the bottleneck's own dispersion.  A packet that reached the path before the one
  ahead of it had left (sent + the path's least delay < the previous arrival) waited behind
  it, so it left the bottleneck back to back with it: runs of such packets, cut in trains of
  :data:`TRAIN_PACKETS` and :data:`TRAIN_S` at least (longer than one burst of a shaper fed in
  bursts: the rate it sustains) that carry :data:`TRAIN_BYTES` at least (a few small packets
  released together by a late delay line are no train), are timed as the delay model times
  its answers (:func:`pcapstats.stats.train_rate`, the first two packets skipped: a token
  bucket lets them through at once), their median rate with its 95 % interval
  (:func:`pcapstats.stats.median_rate`).  Traffic that never queued (slower than the link)
  shows no rate: "not measured", neither in nor out of spec;
- **delay**: the median one-way delay of the packets that did not wait, less their own
  serialisation at the asked rate where the direction serialises;
- **queue**: the most bytes a packet found ahead of it, itself included: those that left the
  path after the moment it would have left had it not waited (its sending + the least
  delay) -- counted in bytes, so a late release does not make the queue look longer;
- **loss**: the loss rule's drops over the packets it was offered, from the counters (the
  lab's links have offloads off: netfilter meets packets as on the wire).

A capture on a host's own interface (:func:`capture`) sees packets after the impairment only:
the rate from the dispersion of what left the interface (packets closer than twice their
serialisation at the asked rate are back to back), the delay from the delay line's own count of
how late it released packets, the loss from its counts of packets on the wire
(:func:`pcapstats.lab.impair.host.loss_counted`); the queue is not seen.

A topology file's run (:func:`network`) is judged from its pings, counters and tools'
reports: each impaired link's median ping (router to router) against its two directions'
delays plus its base (its RTT before any impairment: the veths and forwarding), within 1 ms;
each pair's path against the sum of its links', within 2 ms; the loss asked of a link
direction against its rule's counters; a UDP pair offered above its path's slowest link
delivering that link's rate, within 10 %.

Tolerances (:data:`TOLERANCE`): rate within 10 % of the asked (the lab's stated accuracy);
delay within 10 % + 0.5 ms (the path's own hops and the delay line's passes add ~0.1-0.3 ms);
loss within 4.5 binomial standard deviations of the asked share (a sound random rule is
outside it once in 150 000 runs); queue at most 10 % + two frames over the limit, and, where
the queue dropped packets, at least 80 % of it less two frames (a queue that drops earlier is
not the one asked).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from pcapstats.errors import PcapstatsError
from pcapstats.reader import read
from pcapstats.schema import IP
from pcapstats.stats import SKIPPED_PACKETS, median_rate, train_rate
from pcapstats.units import FRAME_BYTES, parse_rate
from pcapstats.lab.impair.host import loss_counted

TOLERANCE = {"rate": 0.10, "delay": 0.10, "delay_s": 0.5e-3, "loss_sigmas": 4.5,
             "queue": 0.10, "queue_filled": 0.80, "link_rtt_ms": 1.0, "path_rtt_ms": 2.0}
TRAIN_PACKETS = 50         # a long busy run is cut in trains of at least this many packets
TRAIN_S = 5e-3             # ... lasting at least this long: a sustained rate, not one burst
TRAIN_BYTES = 10 * FRAME_BYTES  # a train timed carries this much at least (a batch of ACKs
                                # released together is no train)
BUSY_MARGIN_S = 100e-6     # a packet waited if it came this much before the previous one left
TOWARD = {"data": "toward the receiver", "ack": "toward the sender"}


# -- packets seen before and after the path -------------------------------------------------------
def read_packets(path: str | Path, ids: dict[str, int]) -> dict[str, np.ndarray]:
    """A capture's IPv4 packets: time, frame bytes, source and destination (numbered by
    ``ids``, shared by every capture read for one run), and a key that names a packet across
    captures (addresses, protocol, identification, fragment offset; -1 for an identification
    of 0, which Linux gives to many packets: not matched)."""
    cap = read(path)
    names = [str(a) for a in cap.addresses]
    table = np.array([ids.setdefault(n, len(ids)) for n in names] or [0], np.int64)
    rows = np.flatnonzero(cap.layer(IP) & (cap.column("ip_version") == 4))
    src = table[cap.column("ip_src")[rows]] if names else np.zeros(0, np.int64)
    dst = table[cap.column("ip_dst")[rows]] if names else np.zeros(0, np.int64)
    ip_id = cap.column("ip_id")[rows].astype(np.int64)
    key = ((((src << 8) | dst) << 8 | cap.column("ip_proto")[rows].astype(np.int64)) << 32) \
        | (ip_id << 16) | (cap.column("ip_frag_offset")[rows].astype(np.int64) >> 3)
    key[ip_id == 0] = -1
    return {"t": cap.column("frame_time_ns")[rows].astype(np.int64),
            "wire": cap.column("frame_len")[rows].astype(np.int64), "key": key,
            "src": src, "dst": dst}


def _between(packets: dict, sources: set[str] | None, destinations: set[str] | None,
             ids: dict[str, int]) -> dict[str, np.ndarray]:
    """Those of ``packets`` from ``sources`` to ``destinations`` (None: any)."""
    keep = np.ones(len(packets["t"]), bool)
    for column, wanted in (("src", sources), ("dst", destinations)):
        if wanted is not None:
            keep &= np.isin(packets[column], [ids[a] for a in wanted if a in ids])
    return {name: column[keep] for name, column in packets.items()}


def _matched(before: dict, after: dict) -> np.ndarray:
    """For each packet after the path, the row of its sending before it (-1: none): the latest
    one of the same key at or before its arrival, each sending matched once."""
    nb = len(before["t"])
    key = np.r_[before["key"], after["key"]]
    t = np.r_[before["t"], after["t"]]
    is_before = np.r_[np.ones(nb, bool), np.zeros(len(after["t"]), bool)]
    order = np.lexsort((~is_before, t, key))
    k, b = key[order], is_before[order]
    last = np.maximum.accumulate(np.where(b, np.arange(len(order)), -1))
    ok = (~b) & (last >= 0) & (k >= 0)
    ok[ok] &= k[last[ok]] == k[ok]
    out = np.full(len(after["t"]), -1, np.int64)
    arrivals = order[ok] - nb
    sendings = order[last[ok]]
    first = np.unique(sendings, return_index=True)[1]   # the earliest arrival of each sending
    out[arrivals[first]] = sendings[first]
    return out


def path_measures(before: dict, after: dict, s_per_byte: float, jitter_s: float) -> dict:
    """One direction's delay, dispersion rate and longest wait, from the packets seen before
    and after the path (:func:`read_packets`); ``s_per_byte``: the serialisation a byte meets
    (0 where the direction does not serialise), ``jitter_s`` the delay's spread."""
    sent_at = _matched(before, after)
    got = np.flatnonzero(sent_at >= 0)
    out = {"matched": int(len(got)), "sent": int(len(before["t"])), "delay_s": None,
           "rate": (np.nan,) * 4, "trains": 0, "queued_max_bytes": None}
    if len(got) < 2:
        return out
    order = got[np.argsort(after["t"][got], kind="stable")]
    t_after, wire = after["t"][order], after["wire"][order]
    t_before = before["t"][sent_at[order]]
    own = (t_after - t_before) / 1e9 - wire * s_per_byte      # each packet's delay and wait
    least = float(own.min())
    margin = BUSY_MARGIN_S + 2 * jitter_s
    waited = np.r_[False, t_before[1:] / 1e9 + least + margin < t_after[:-1] / 1e9]
    alone = own[~waited]
    out["delay_s"] = float(np.median(alone)) if len(alone) else least
    # the bytes ahead of each packet: those that left after it would have, had it not waited
    ready = t_before + round(least * 1e9)
    left = np.r_[0, np.cumsum(wire)]
    ahead = left[np.arange(1, len(wire) + 1)] - left[np.searchsorted(t_after, ready, "right")]
    out["queued_max_bytes"] = int(np.max(np.maximum(ahead, wire)))
    trains = _trains(t_after, wire, waited)
    out["rate"], out["trains"] = median_rate(trains), sum(r[0] == r[0] for r in trains)
    return out


def _trains(t: np.ndarray, wire: np.ndarray, behind: np.ndarray) -> list[tuple]:
    """train_rate of each train: a run of packets ``behind`` the one before (with its head),
    cut in pieces of TRAIN_PACKETS and TRAIN_S at least (a shorter tail joins the piece
    before it), each timed if it carries TRAIN_BYTES past its skipped first packets."""
    out = []
    starts = np.flatnonzero(np.diff(np.r_[0, behind.astype(np.int8)]) == 1) - 1
    ends = np.flatnonzero(np.diff(np.r_[behind.astype(np.int8), 0]) == -1) + 1
    for a, b in zip(starts.tolist(), ends.tolist()):    # a run: its head and those behind it
        cuts = [a]
        while True:
            c = cuts[-1] + TRAIN_PACKETS
            c = c + int(np.searchsorted(t[c:b], t[cuts[-1]] + TRAIN_S * 1e9)) if c < b else b
            if c >= b or b - c < TRAIN_PACKETS or t[b - 1] - t[c] < TRAIN_S * 1e9:
                cuts.append(b)
                break
            cuts.append(c)
        out += [train_rate(t[c:d], wire[c:d], wire[c:d]) for c, d in zip(cuts, cuts[1:])
                if wire[c + SKIPPED_PACKETS:d].sum() >= TRAIN_BYTES]
    return out


def dispersion(after: dict, rate_bps: float) -> tuple:
    """The rate packets left a shaper at (a capture after it alone): trains of packets each
    closer to the one before than twice its serialisation at ``rate_bps`` (+ the busy
    margin), timed as :func:`path_measures` times them; (rate, factor, low, high), trains."""
    t, wire = after["t"], after["wire"]
    if len(t) < 2:
        return (np.nan,) * 4, 0
    order = np.argsort(t, kind="stable")
    t, wire = t[order], wire[order]
    close = np.r_[False, np.diff(t) / 1e9 <= 2 * wire[1:] * 8 / rate_bps + BUSY_MARGIN_S]
    trains = _trains(t, wire, close)
    return median_rate(trains), sum(r[0] == r[0] for r in trains)


# -- checks ---------------------------------------------------------------------------------------
def _check(quantity: str, direction: str | None, asked, achieved, unit: str, tolerance: str,
           in_spec: bool | None, how: str, low=None, high=None, why_not: str | None = None,
           **more) -> dict:
    def plain(v):
        return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else v
    return {"quantity": quantity, "direction": direction, "asked": plain(asked),
            "achieved": plain(achieved), "low": plain(low), "high": plain(high), "unit": unit,
            "tolerance": tolerance, "in_spec": in_spec, "how": how,
            "why_not": why_not if plain(achieved) is None else None, **more}


def rate_check(direction: str | None, asked_bps: float, rate: tuple, trains: int,
               how: str) -> dict:
    achieved, _, low, high = rate
    if achieved != achieved:
        return _check("rate", direction, asked_bps, None, "bit/s", "±10 %", None, how,
                      why_not="the link never filled", trains=trains)
    ok = abs(achieved / asked_bps - 1) <= TOLERANCE["rate"]
    return _check("rate", direction, asked_bps, float(achieved), "bit/s", "±10 %", ok, how,
                  low=float(low), high=float(high), trains=trains)


def delay_check(direction: str | None, asked_s: float, achieved_s: float | None,
                how: str, why_not: str = "no packet seen on both sides") -> dict:
    bound = TOLERANCE["delay"] * asked_s + TOLERANCE["delay_s"]
    ok = None if achieved_s is None else abs(achieved_s - asked_s) <= bound
    return _check("delay", direction, asked_s * 1e3, None if achieved_s is None
                  else achieved_s * 1e3, "ms", "±10 % +0.5 ms", ok, how, why_not=why_not)


def loss_check(direction: str | None, asked: float, dropped: int | None, offered: int | None,
               how: str) -> dict:
    if not offered:
        return _check("loss", direction, asked, None, "fraction", "±4.5 sd", None, how,
                      why_not="nothing was offered", dropped=dropped, offered=offered)
    share = dropped / offered
    sd = math.sqrt(asked * (1 - asked) / offered)
    ok = abs(share - asked) <= TOLERANCE["loss_sigmas"] * sd + 0.5 / offered
    return _check("loss", direction, asked, share, "fraction", "±4.5 sd", ok, how,
                  dropped=dropped, offered=offered)


def queue_check(limit: int, waited_bytes: float | None, drops: int, how: str,
                why_not: str = "no packet seen on both sides") -> dict:
    slack = 2 * FRAME_BYTES
    if waited_bytes is None:
        return _check("queue", None, limit, None, "bytes", "+10 % +2 frames", None, how,
                      why_not=why_not, drops=drops)
    ok = waited_bytes <= (1 + TOLERANCE["queue"]) * limit + slack
    if drops:
        ok = ok and waited_bytes >= TOLERANCE["queue_filled"] * limit - slack
    return _check("queue", None, limit, float(waited_bytes), "bytes", "+10 % +2 frames", ok,
                  how + ("; it dropped, so it filled: at least 80 % less 2 frames" if drops
                         else ""), drops=drops)


def verdict(checks: list[dict], error: str | None = None) -> dict:
    """The ``achieved`` block: the checks, whether all measured ones are in spec (None when
    none could be measured) and one line for each that is not; ``error``: why nothing could
    be measured (a capture that cannot be read)."""
    judged = [c["in_spec"] for c in checks if c["in_spec"] is not None]
    return {"checks": checks, "in_spec": all(judged) if judged else None,
            "out_of_spec": [describe(c) for c in checks if c["in_spec"] is False],
            "retried_after": None, "error": error}


def measured(how, *args) -> dict:
    """``how(*args)`` (:func:`lab_run`, :func:`capture`), or a block that says why it could
    not be measured: a run's files and sidecar are kept whatever its captures hold."""
    try:
        return how(*args)
    except (PcapstatsError, ValueError, OSError) as e:
        return verdict([], error=f"not measured: {e}")


# -- a lab run ------------------------------------------------------------------------------------
def lab_run(doc: dict, before: str | Path, after: str | Path) -> dict:
    """The achieved block of a lab run (its sidecar so far ``doc``) from a capture before the
    path (the sender's side) and one after it (the receiver's side)."""
    links = doc.get("hops") or ([doc["impairment"]] if doc.get("impairment") else [])
    if not links:
        return verdict([])
    pairs = (doc.get("topology") or {}).get("pairs") or []
    senders = {p["sender_ip"] for p in pairs}
    receivers = {p["receiver_ip"] for p in pairs}
    asked = [link["asked"] for link in links]
    rates = [a.get("rate_bps") for a in asked if a.get("rate_bps")]
    jitter_s = sum(a.get("jitter_s") or 0 for a in asked)
    ids: dict[str, int] = {}
    seen = {"before": read_packets(before, ids), "after": read_packets(after, ids)}
    checks = []
    queued = None
    for direction, src, dst, b_side, a_side in (("data", senders, receivers, "before", "after"),
                                                 ("ack", receivers, senders, "after", "before")):
        serialising = [a["rate_bps"] for a in asked if a.get("serialize") and a.get("rate_bps")
                       and (direction == "data" or not a.get("one_way"))]
        s_per_byte = sum(8 / r for r in serialising)
        m = path_measures(_between(seen[b_side], src, dst, ids),
                          _between(seen[a_side], src, dst, ids), s_per_byte, jitter_s)
        how = (f"{m['matched']} packets timed across the path (captures before and after "
               "it)")
        shaped = min(serialising) if serialising else (min(rates) if rates and
                                                       direction == "data" else None)
        if shaped:
            checks.append(rate_check(TOWARD[direction], shaped, m["rate"], m["trains"],
                                     f"{m['trains']} trains of packets that left the "
                                     "bottleneck back to back (" + how + ")"))
        delay_s = sum(a.get("delay_s") or 0 for a in asked)
        if delay_s or jitter_s:
            checks.append(delay_check(TOWARD[direction], delay_s, m["delay_s"],
                                      "median of the packets that did not wait, less their "
                                      "serialisation (" + how + ")"))
        if direction == "data":
            queued = m["queued_max_bytes"]
    for key, direction in (("loss", "data"), ("ack_loss", "ack")):
        wanted = [a.get(key) or 0.0 for a in asked]
        if not any(wanted):
            continue
        counted = [((link.get("counters") or {}).get("loss") or {}).get(direction) or {}
                   for link in links]
        dropped = sum(c.get("dropped_packets") or 0 for c in counted)
        offered = counted[0].get("offered_packets")
        path_share = 1 - math.prod(1 - w for w in wanted)
        checks.append(loss_check(TOWARD[direction], path_share, dropped, offered,
                                 "the loss rule's drops over the packets it was offered (its "
                                 "counters; packets as on the wire)"))
    if rates:
        slowest = min(range(len(asked)), key=lambda k: asked[k].get("rate_bps") or math.inf)
        limit = asked[slowest].get("queue_limit_bytes") or asked[slowest].get("queue_bytes")
        counters = links[slowest].get("counters") or {}
        drops = _queue_drops(counters)
        checks.append(queue_check(limit, queued, drops,
                                  "the most bytes a packet toward the receiver found ahead of "
                                  "it; drops: the queue's own (tbf, the delay line's full "
                                  "queue)"))
    return verdict(checks)


def _queue_drops(counters: dict) -> int:
    """Packets the rate's queue dropped: tbf's, and the serialising delay line's full queue."""
    tbf = sum(q.get("dropped_packets") or 0 for q in (counters.get("qdiscs") or {}).values())
    lines = (counters.get("delay") or {}).values()
    return tbf + sum(((d.get("program") or {}).get("packets_overflowed") or 0) for d in lines)


# -- a topology file's run: every link, path and pair ------------------------------------------
def network(doc: dict) -> dict:
    """The achieved block of a topology file's run (:mod:`pcapstats.lab.network_run`), from its
    pings, its counters and its tools' reports: each link's RTT against its two delays plus
    its base, each path's against the sum of its links', the loss asked of a link direction
    against its rule's drops, and a UDP pair sent above its path's bottleneck delivering
    that rate.  Each check's ``direction`` names its link, path or pair."""
    checks = []
    for link in doc.get("links") or []:
        ping = link.get("ping") or {}
        if ping.get("asked_ms") is not None and any(d.get("asked") for d in link["directions"]):
            checks.append(rtt_check(f"link {link['name']}", ping, "asked_ms", "base_ms",
                                    TOLERANCE["link_rtt_ms"],
                                    f"median of {ping.get('received')} pings from "
                                    f"{ping.get('from')} to {ping.get('to')} against the two "
                                    "directions' delays plus the link's RTT before any "
                                    "impairment (its base)"))
        for d in link.get("directions") or []:
            loss = (d.get("asked") or {}).get("loss")
            if loss:
                counted = ((d.get("counters") or {}).get("loss") or {}).get("data") or {}
                checks.append(loss_check(f"link {d['from']}→{d['to']}", loss,
                                         counted.get("dropped_packets"),
                                         counted.get("offered_packets"),
                                         "the loss rule's drops over the packets it was "
                                         "offered (its counters)"))
    for path in doc.get("paths") or []:
        ping = path.get("ping") or {}
        if ping.get("links_ms") is not None:
            checks.append(rtt_check(f"path {path['from']}→{path['to']}", ping, "links_ms",
                                    None, TOLERANCE["path_rtt_ms"],
                                    f"median of {ping.get('received')} pings from "
                                    f"{path['from']} to {path['to']} against the sum of its "
                                    f"links' ({', '.join(path['links'])})"))
    for pair in doc.get("pairs") or []:
        path = (doc.get("paths") or [])[pair["pair"]]
        bottleneck = path["asked"].get("bottleneck_bps")
        got = (pair.get("achieved") or {}).get("goodput_bps")
        if pair["tool"] != "iperf3-udp" or not bottleneck or got is None:
            continue
        offered = parse_rate(pair["udp_rate"])
        if offered <= bottleneck * (1 + TOLERANCE["rate"]):
            continue
        ok = abs(got / bottleneck - 1) <= TOLERANCE["rate"]
        checks.append(_check("rate", f"{pair['label']} {pair['from']}→{pair['to']}",
                             bottleneck, float(got), "bit/s", "±10 %", ok,
                             f"iperf3's received rate of UDP offered at "
                             f"{offered / 1e6:g} Mbit/s against the path's slowest link "
                             f"({path['asked'].get('bottleneck_link')})"))
    return verdict(checks)


def rtt_check(direction: str, ping: dict, asked_key: str, base_key: str | None,
              tolerance_ms: float, how: str) -> dict:
    """A ping's median RTT against the asked (plus a base measured apart), within a number of
    milliseconds."""
    asked = ping[asked_key] + ((ping.get(base_key) or 0.0) if base_key else 0.0)
    got = ping.get("median_ms")
    ok = None if got is None else abs(got - asked) <= tolerance_ms
    return _check("rtt", direction, asked, got, "ms", f"±{tolerance_ms:g} ms", ok, how,
                  why_not="every ping was lost")


# -- a capture on this host's interface -----------------------------------------------------------
def capture(doc: dict, path: str | Path) -> dict:
    """The achieved block of ``pcapstats capture`` (its sidecar so far ``doc``, the capture
    ``path``): what left the interface, and the impairment's own counters."""
    imp = doc.get("impairment") or {}
    asked, counters = imp.get("asked") or {}, imp.get("counters") or {}
    if not asked:
        return verdict([])
    out = "out of the interface"
    checks = []
    if asked.get("rate_bps"):
        mine = set((doc.get("interface") or {}).get("addresses") or []) or None
        ids: dict[str, int] = {}
        rate, trains = dispersion(_between(read_packets(path, ids), mine, None, ids),
                                  asked["rate_bps"])
        checks.append(rate_check(out, asked["rate_bps"], rate, trains,
                                 f"{trains} trains of packets that left the interface back to "
                                 "back (the capture's own dispersion)"))
    if asked.get("delay_s") or asked.get("jitter_s"):
        program = (counters.get("delay_line") or {}).get("program") or {}
        late = program.get("late_us_mean")
        achieved = None if late is None else asked["delay_s"] + late / 1e6
        checks.append(delay_check(out, asked["delay_s"], achieved,
                                  "the delay line's own count: the delay plus how late it "
                                  "released packets on average", why_not="netem does not "
                                  "count it"))
    if asked.get("loss"):
        counted = loss_counted(counters.get("loss"))
        dropped, offered, unit = counted or (None, None, "packets")
        checks.append(loss_check(out, asked["loss"], dropped, offered,
                                 f"drops over the {unit} the loss was offered (its counters)"))
    if asked.get("rate_bps"):
        q = counters.get("qdisc") or {}
        checks.append(queue_check(asked.get("queue_bytes") or 0, None,
                                  q.get("dropped_packets") or 0, "tbf's drops",
                                  why_not="seen after it only"))
    return verdict(checks)


# -- saying it ------------------------------------------------------------------------------------
def _value(check: dict, v) -> str:
    return quantity_text(v, check["unit"])


def quantity_text(v: float, unit: str) -> str:
    """One number of a run's summary in the unit a person reads it in: "20.0 Mbit/s",
    "1.40 Gbit/s", "5.10 ms", "10.43 %", "19.7 kB"."""
    if unit == "bit/s":
        return f"{v / 1e9:.2f} Gbit/s" if v >= 1e9 else f"{v / 1e6:.1f} Mbit/s"
    if unit == "ms":
        return f"{v:.2f} ms"
    if unit == "fraction":
        return f"{v * 100:.2f} %"
    return f"{v / 1e3:.1f} kB"


SHORT = {"toward the receiver": "→ receiver", "toward the sender": "→ sender",
         "out of the interface": "out"}


def describe(check: dict) -> str:
    """"rate toward the receiver 11.2 Mbit/s, asked 20.0 Mbit/s (within ±10 %)"."""
    what = " ".join(w for w in (check["quantity"], check["direction"]) if w)
    got = "not measured" if check["achieved"] is None else _value(check, check["achieved"])
    return (f"{what} {got}, {'limit' if check['quantity'] == 'queue' else 'asked'} "
            f"{_value(check, check['asked'])} (within {check['tolerance']})")


def lines(achieved: dict | None) -> list[str]:
    """The run summary's lines: one a check, ending ok, OUT OF SPEC or why it was not
    measured."""
    if achieved and achieved.get("error"):
        return [f"achieved against asked: {achieved['error']}"]
    if not achieved or not achieved.get("checks"):
        return []
    out = ["achieved against asked:"]
    for c in achieved["checks"]:
        label = " ".join(w for w in (c["quantity"], SHORT.get(c["direction"],
                                                              c["direction"]) or "") if w)
        asked = f"{'limit' if c['quantity'] == 'queue' else 'asked'} {_value(c, c['asked'])}"
        if c["achieved"] is None:
            out.append(f"  {label:<16} not measured: {c['why_not']} ({asked})")
            continue
        mark = {True: "ok", False: "OUT OF SPEC", None: "not judged"}[c["in_spec"]]
        out.append(f"  {label:<16} {_value(c, c['achieved'])}, {asked} ({c['tolerance']}): "
                   f"{mark}")
    if achieved.get("retried_after"):
        out.append("  (a second attempt: the first was out of spec too)")
    return out
