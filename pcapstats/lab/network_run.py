"""One lab run of a topology file (:mod:`.network`): its network built, each impaired link
direction applied on the router it leaves, every link and every pair's path pinged, the pairs'
traffic run (each its own tool, -P, cc, start, repeats), captures at the file's points, and a
sidecar naming every link, path and pair with what was asked and what was achieved.

    net = network.load("topologies/seed000.toml")
    doc = run_network(net, "runs/seed000.pcap")
    doc["links"][9]["ping"]["median_ms"], doc["paths"][0]["ping"]["median_ms"]

The run is a :class:`pcapstats.lab.run._Run` with its steps of its own: every exit path saves
what was captured and undoes every host change, as ``lab run`` does (Ctrl-C included).

Measuring (``run.measure``, on by default): before any impairment, each link is pinged from its
first end to its second (its *base*: the veth pair and the forwarding, ~0.05 ms); with the
impairments on, each link again (router to router: the link's RTT) and each pair's path
(sender to receiver), all at once (pings are too small to load one another), recorded at every
capture point in captures of their own (``NAME.measure.pcap``, ``NAME.measure-<point>.pcap``)
that stop before the traffic starts, so the traffic's captures hold the traffic alone.  Each
ping carries an ICMP identifier of its own (:data:`LINK_IDENT`, :data:`PATH_IDENT`), which the
sidecar keeps beside ping's report: ``pcapstats ping`` names its session.  A link's asked RTT
is its two directions' delays plus its base; a path's, the sum of its links'.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from pathlib import Path
from typing import Callable

from pcapstats import sidecar
from pcapstats.lab import accuracy, impair, network, topologies, traffic
from pcapstats.lab.cleanup import signals_unwind
from pcapstats.lab.commands import require_tools
from pcapstats.lab.netns import Bottleneck, Lab
from pcapstats.lab.run import CLIENT_START_S, _capture_output, _measured, _pausing, _Run

BASE_PINGS, BASE_INTERVAL_S = 5, 0.02
# The measuring pings' ICMP identifiers (ping -e): link K's LINK_IDENT + K (from 0, as in
# the sidecar's links[]), pair K's path PATH_IDENT + K - 1: what names them in a capture.
LINK_IDENT, PATH_IDENT = 0x7000, 0x7800
PORT_BASE = 20000  # pair K (from 1), transfer R: port PORT_BASE + 1000 (K - 1) + R - 1


def run_network(net: network.Network, out_path: str | Path, *,
                progress: Callable[[str], None] | None = None,
                command: list[str] | None = None) -> dict:
    """Run the topology; write its capture(s) and sidecar for ``out_path``; return the
    sidecar.  Raises as :func:`pcapstats.lab.run.run` does."""
    tools = ["ip", "ethtool", "tc", "iptables", "tcpdump", "ping"]
    if any(p.tool.startswith("iperf3") for p in net.pairs):
        tools.append("iperf3")
    if net.format == "pcapng":
        tools.append("editcap")
    require_tools(*tools)
    out_path = _capture_output(out_path, net.format)
    say = _pausing(progress or (lambda stage: None))
    with signals_unwind():
        return _NetworkRun(net, out_path, say, command).go()


class _NetworkRun(_Run):
    """A topology file's run: the steps of :class:`_Run`, for many links and pairs."""

    def __init__(self, net: network.Network, out_path: Path, say, command):
        super().__init__(None, out_path, say, command)
        self.net = net
        self.directions: list[tuple[dict, network.Direction]] = []  # impaired, as applied
        self.doc.update(network={"file": str(net.file), **net.source}, links=[], paths=[],
                        pairs=[])
        self.reports_lock = threading.Lock()

    def _running(self) -> str:
        return f"{len(self.net.pairs)} pairs' traffic"

    # -- the steps ----------------------------------------------------------------------------
    def _build(self) -> Lab:
        net = self.net
        lab = topologies.network(net)
        names = net.interface_names()
        self.pairs = lab.pairs
        self.doc["topology"] = {
            "name": "file", "network": net.name, "about": net.about, "file": str(net.file),
            "routers": net.routers, "hosts": net.hosts,
            "pairs": [{"sender": p.sender, "receiver": p.receiver,
                       "sender_ip": lab.address(p.sender), "receiver_ip": lab.address(p.receiver),
                       "cc": p.cc} for p in net.pairs],
            "bottleneck": None}
        for link in net.links:
            self.doc["links"].append({
                "name": link.name, "ends": list(link.ends),
                "addresses": {n: link.address(n) for n in link.ends},
                "interfaces": {n: names[(n, link.ends[1 - k])] for k, n in
                               enumerate(link.ends)},
                "directions": [{"from": d.sender, "to": d.receiver, "asked_text": d.asked,
                                "asked": None, "router": None, "interface": None,
                                "mechanisms": None, "settings": None, "counters": None}
                               for d in link.directions],
                "ping": None})
        for p in net.pairs:
            nodes = net.path(p.sender, p.receiver)
            hops = net.links_on(nodes)
            back = net.links_on(nodes[::-1])
            rates = [d.impairment.rate_bps for d in hops if d.impairment.rate_bps]
            self.doc["paths"].append({
                "pair": p.index, "label": p.label, "from": p.sender, "to": p.receiver,
                "nodes": nodes, "links": [net.link_between(a, b).name
                                          for a, b in zip(nodes, nodes[1:])],
                "asked": {"delay_ms": 1e3 * sum(d.impairment.delay_s for d in hops),
                          "delay_back_ms": 1e3 * sum(d.impairment.delay_s for d in back),
                          "rtt_ms": 1e3 * sum(d.impairment.delay_s for d in [*hops, *back]),
                          "bottleneck_bps": min(rates) if rates else None,
                          "bottleneck_link": _slowest(net, hops)},
                "ping": None})
            self.doc["pairs"].append({
                "pair": p.index, "label": p.label, "from": p.sender, "to": p.receiver,
                "tool": p.tool, "parallel": p.parallel, "cc": p.cc, "start_s": p.start_s,
                "duration_s": None if p.bytes else (p.duration_s or net.duration_s),
                "bytes": p.bytes, "udp_rate": p.udp_rate, "app_rate": p.app_rate,
                "repeat": p.repeat, "gap_s": p.gap_s, "ping_during": p.ping_during,
                "achieved": None})
        return lab

    def _impair(self, lab: Lab) -> None:
        """The links' base RTT first (nothing applied yet), then each impaired direction on
        the router it leaves, in its own chains and queues (one slot a direction there)."""
        if self.net.measure:
            self.say("measuring each link's base RTT")
            for entry, result in zip(self.doc["links"], self._link_pings(
                    lab, BASE_PINGS, BASE_INTERVAL_S)):
                entry["ping"] = {"base_ms": _median(result)}
        self.say("applying the impairment")
        slots: dict[str, int] = {}
        names = self.net.interface_names()
        for link, entry in zip(self.net.links, self.doc["links"]):
            for d, described in zip(link.directions, entry["directions"]):
                if not d.impaired:
                    continue
                device = names[(d.sender, d.receiver)]
                slot = slots.get(d.sender, 0)
                slots[d.sender] = slot + 1
                applied = impair.apply(lab, Bottleneck(d.sender, egress=device, ingress=None),
                                       d.impairment, slot=slot, local=True)
                self.applied.append(applied)
                self.directions.append((described, d))
                shown = applied.as_dict()
                described.update(router=d.sender, interface=device,
                                 asked={**shown["impairment"],
                                        "queue_limit_bytes": d.impairment.queue_limit_bytes
                                        if d.impairment.rate_bps else None},
                                 mechanisms=shown["mechanisms"], settings=shown["settings"])

    def _measure_rtt(self, lab: Lab) -> None:
        """Each link router to router and each pair's path, all at once, captured at every
        capture point in files of their own (NAME.measure.pcap; the traffic's files hold none
        of them, so a study of those reads the traffic alone); ``rtt`` is the first pair's
        path (as a lab run's)."""
        net = self.net
        if not net.measure:
            return
        measuring = self._start_captures_of(lab, "measure")
        work = Path(lab.scratch_dir("pings"))
        links = [traffic.start_ping(lab, link.ends[0], link.ends[1], work,
                                    count=net.ping_count, interval_s=net.ping_interval_s,
                                    address=link.address(link.ends[1]),
                                    ident=LINK_IDENT + k)
                 for k, link in enumerate(net.links)]
        paths = [traffic.start_ping(lab, p.sender, p.receiver, work, count=net.ping_count,
                                    interval_s=net.ping_interval_s, ident=PATH_IDENT + p.index)
                 for p in net.pairs]
        for r in [*links, *paths]:
            r.launch()
        results = [r.finish()["raw"]["runs"][0] for r in [*links, *paths]]
        for _, tcpdump, _ in measuring:       # their packets all in: the traffic's are not
            tcpdump.stop(allow_drops=True)    # (drops are said when the run is saved)
        for k, (link, entry, result) in enumerate(zip(net.links, self.doc["links"], results)):
            asked = 1e3 * sum(d.impairment.delay_s for d in link.directions)
            entry["ping"] = {**(entry["ping"] or {}), "from": link.ends[0], "to": link.ends[1],
                             "address": link.address(link.ends[1]), "ident": LINK_IDENT + k,
                             "asked_ms": asked, **_summary(result)}
        by_name = {e["name"]: e for e in self.doc["links"]}
        for p, entry, result in zip(net.pairs, self.doc["paths"], results[len(links):]):
            on_path = [by_name[n]["ping"] for n in entry["links"]]
            entry["ping"] = {"from": p.sender, "to": p.receiver,
                             "address": lab.address(p.receiver), "ident": PATH_IDENT + p.index,
                             "asked_ms": entry["asked"]["rtt_ms"],
                             "base_ms": _sum(q.get("base_ms") for q in on_path),
                             "links_ms": _sum(q.get("median_ms") for q in on_path),
                             **_summary(result)}
        if self.doc["paths"]:
            first = self.doc["paths"][0]["ping"]
            self.doc["rtt"] = {"from": first["from"], "to": first["to"],
                               "count": net.ping_count, "interval_s": net.ping_interval_s,
                               "samples_ms": first["samples_ms"], "median_ms":
                               first["median_ms"], "asked_ms": first["asked_ms"] or None}

    def _link_pings(self, lab: Lab, count: int, interval_s: float) -> list[dict]:
        work = Path(lab.scratch_dir("pings"))
        running = [traffic.start_ping(lab, link.ends[0], link.ends[1], work, count=count,
                                      interval_s=interval_s, address=link.address(link.ends[1]))
                   for link in self.net.links]
        for r in running:
            r.launch()
        return [r.finish()["raw"]["runs"][0] for r in running]

    def _start_captures(self, lab: Lab) -> None:
        self._start_captures_of(lab, "traffic")

    def _start_captures_of(self, lab: Lab, phase: str) -> list[tuple[dict, object, Path]]:
        """tcpdump at every capture point for one phase of the run: ``measure`` (the
        measuring pings: NAME.measure.pcap, or NAME.measure-<point>.pcap) or ``traffic``
        (NAME.pcap, or NAME.<point>.pcap)."""
        net = self.net
        several = len(net.capture) > 1
        senders = {p.sender for p in net.pairs}
        receivers = {p.receiver for p in net.pairs}
        started = []
        for point in net.capture:
            host, iface = net.capture_point(point)
            label = network.capture_label(point)
            if phase == "measure":
                label = f"measure-{label}" if several else "measure"
            final = sidecar.capture_path(self.out_path, label if several or phase == "measure"
                                         else None, net.format)
            partial = sidecar.partial_path(final)
            self.say(f"starting tcpdump on {host}:{iface}")
            tcpdump = lab.capture(host, iface, partial, snaplen=net.snaplen, nano=True,
                                  pcapng=net.format == "pcapng")
            self._hold(partial.with_name(partial.name + ".tmp.pcap")
                       if net.format == "pcapng" else partial)
            side = ("router" if host in net.routers else "sender" if host in senders - receivers
                    else "receiver" if host in receivers - senders else None)
            entry = {"file": final.name, "phase": phase, "side": side, "point": point,
                     "host": host, "interface": iface, "snaplen": net.snaplen,
                     "format": net.format, "timestamps": "nano",
                     "impairments": self._placements(host, iface)}
            self.captures.append((entry, tcpdump, partial))
            started.append((entry, tcpdump, partial))
        return started

    def _placements(self, host: str, iface: str) -> list[dict]:
        """Each impaired direction against a capture point: on the capturing node's own
        interface it acts before tcpdump sees the packets leaving (where "before"); elsewhere
        it is said where it sits and left to the reader (where "elsewhere")."""
        out = []
        for described, d in self.directions:
            for what, amount in _amounts(d):
                mine = d.sender == host and described["interface"] == iface
                out.append({"what": what, "amount": amount,
                            "packets": f"leaving {d.sender} {described['interface']} toward "
                                       f"{d.receiver}",
                            "sources": [], "where": "before" if mine else "elsewhere",
                            "at": f"router {d.sender} {described['interface']}, egress",
                            "own_egress": False})
        return out

    # -- the traffic --------------------------------------------------------------------------
    def _traffic(self, lab: Lab, work: Path) -> None:
        """Every pair's first transfer (and pings under load) ready, then all launched from one
        instant (each start_s later), each pair's repeats in a thread of its own."""
        pairs = self.net.pairs
        first = [self._start(lab, work, p, 0) for p in pairs]
        at_s = time.time() + CLIENT_START_S
        errors: list[BaseException] = []
        threads = [threading.Thread(target=self._pair_loop, daemon=True,
                                    args=(lab, work, p, first[p.index], at_s + p.start_s,
                                          errors)) for p in pairs]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.2)
        if errors:
            raise errors[0]
        for p in pairs:
            self._pair_achieved(p)

    def _start(self, lab: Lab, work: Path, pair: network.Pair, repeat: int
               ) -> list[traffic.Running]:
        """One transfer of a pair (its tool's server up, the client not launched), and its
        pings under load."""
        s = network.scenario(pair, self.net)
        where = work / f"pair{pair.index + 1}-{repeat + 1}"
        port = PORT_BASE + 1000 * pair.index + repeat
        snd, rcv = pair.sender, pair.receiver
        nbytes = s.transfer_bytes()
        if s.tool == "simpleperf":
            tool = traffic.start_simpleperf(lab, snd, rcv, where, port=port,
                                            duration_s=s.duration_s, nbytes=nbytes,
                                            parallel=pair.parallel, cc=pair.cc,
                                            app_rate_bps=s.app_rate_bps())
        elif s.tool in ("iperf3", "iperf3-udp"):
            udp = s.tool == "iperf3-udp"
            tool = traffic.start_iperf3(lab, snd, rcv, where, port=port,
                                        duration_s=s.duration_s, nbytes=nbytes,
                                        parallel=pair.parallel, cc=None if udp else pair.cc,
                                        udp_rate_bps=s.udp_rate_bps() if udp else None,
                                        app_rate_bps=None if udp else s.app_rate_bps())
        elif s.tool == "ping":
            tool = traffic.start_ping(lab, snd, rcv, where, count=s.ping_count,
                                      interval_s=s.ping_interval_s, size=s.ping_sizes[0])
        elif s.tool.startswith("pingpong"):
            tool = traffic.start_pingpong(lab, snd, rcv, where, port=port, sizes=s.ping_sizes,
                                          repetitions=s.ping_count,
                                          interval_s=s.ping_interval_s,
                                          udp=s.tool == "pingpong-udp",
                                          cc=None if s.tool == "pingpong-udp" else pair.cc)
        else:
            tool = traffic.start_file_transfer(
                lab, snd, rcv, where, port=port, proto="tcp" if s.tool == "tcp-file" else "udp",
                size_bytes=nbytes or 1_000_000, seed=s.seed, cc=pair.cc,
                udp_rate_bps=s.udp_rate_bps() or 10e6)
        out = [tool]
        if pair.ping_during and s.tool != "ping":
            count = (math.ceil(s.duration_s / s.ping_interval_s) if not nbytes
                     else s.ping_count)
            out.append(traffic.start_ping(lab, snd, rcv, where, count=max(1, count),
                                          interval_s=s.ping_interval_s, size=s.ping_sizes[0]))
        return out

    def _pair_loop(self, lab: Lab, work: Path, pair: network.Pair,
                   first: list[traffic.Running], at_s: float, errors: list) -> None:
        """A pair's transfers: the first at ``at_s``, each next gap_s after the one before
        ended; its reports kept as they come."""
        try:
            running = first
            for repeat in range(pair.repeat):
                if repeat:
                    time.sleep(pair.gap_s)
                    running = self._start(lab, work, pair, repeat)
                for r in running:
                    r.launch(at_s if repeat == 0 else None)
                for r, during in zip(running, (False, True)):
                    self._add(pair, repeat, r.finish(), during)
        except BaseException as e:  # noqa: BLE001 -- raised again by the main thread
            errors.append(e)

    def _add(self, pair: network.Pair, repeat: int, report: dict, during: bool) -> None:
        with self.reports_lock:
            for flow in report.pop("flows"):
                self.doc["flows"].append({"pair": pair.index, "repeat": repeat,
                                          "tool": report["tool"], **flow})
            self.doc["reports"].append({"pair": pair.index, "repeat": repeat,
                                        "under_load": during, **report})

    def _pair_achieved(self, pair: network.Pair) -> None:
        """What the pair got, from its tools' own reports: goodput (received bytes over each
        transfer's time, the transfers' mean), transfers done, the RTT under load."""
        mine = [r for r in self.doc["reports"] if r["pair"] == pair.index]
        tools = [r for r in mine if not r["under_load"] and r["mode"] != "icmp"]
        rates = [r["summary"].get("throughput_bps") for r in tools]
        rates = [x for x in rates if x is not None]
        pings = [x for r in mine if r["under_load"] for x in r["summary"]["median_ms"]
                 if x is not None]
        udp = [r["summary"] for r in tools if r["mode"] == "udp"]
        self.doc["pairs"][pair.index]["achieved"] = {
            "transfers": len(tools), "goodput_bps": statistics.fmean(rates) if rates else None,
            "rtt_under_load_ms": statistics.median(pings) if pings else None,
            "lost_packets": sum(u.get("lost_packets") or 0 for u in udp) if udp else None,
            "lost_percent": udp[0].get("lost_percent") if len(udp) == 1 else None}

    # -- saving -------------------------------------------------------------------------------
    def _counters(self) -> list[dict]:
        out = super()._counters()
        for (described, _), counters in zip(self.directions, out):
            described["counters"] = counters
        return []   # no single impairment: each direction holds its own

    def _measured(self) -> dict:
        """As a lab run's; the rate asked is the pairs' bottleneck where they share one link
        (else null: each pair has its own, paths[].asked)."""
        links = {p["asked"]["bottleneck_link"] for p in self.doc["paths"]}
        rates = {p["asked"]["bottleneck_bps"] for p in self.doc["paths"]}
        return {**_measured(self.doc),
                "rate_asked_bps": rates.pop() if len(links) == 1 and len(rates) == 1 else None}

    def _achieved(self) -> dict | None:
        return accuracy.measured(accuracy.network, self.doc)


def _slowest(net: network.Network, hops: list[network.Direction]) -> str | None:
    rated = [d for d in hops if d.impairment.rate_bps]
    if not rated:
        return None
    d = min(rated, key=lambda d: d.impairment.rate_bps)
    return net.link_between(d.sender, d.receiver).name


def _amounts(d: network.Direction) -> list[tuple[str, str]]:
    return [(what, text) for what, text in d.asked.items()]


def _summary(result: dict) -> dict:
    samples = [r["rtt_ms"] for r in result["replies"]]
    reported = {k: v for k, v in result["summary"].items() if k != "median_ms"}
    return {"count": result["count"], "interval_s": result["interval_s"],
            "received": len(samples), "samples_ms": samples,
            "median_ms": statistics.median(samples) if samples else None,
            "min_ms": min(samples) if samples else None, "reported": reported}


def _median(result: dict) -> float | None:
    samples = [r["rtt_ms"] for r in result["replies"]]
    return statistics.median(samples) if samples else None


def _sum(values) -> float | None:
    values = list(values)
    return None if not values or None in values else sum(values)
