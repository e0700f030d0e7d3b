"""The sidecar: one JSON file beside a lab run's capture(s) saying what was set and what was seen.

This module is the format's reading side, at the bottom of the package (the analyses read
sidecars; the lab, which writes them through pcapstats.lab.sidecar, sits above them).

Naming.  A run asked to write ``-o DIR/NAME.pcap`` (or ``.pcapng``) writes its sidecar to
``DIR/NAME.json``, and its capture(s) to

- ``DIR/NAME.pcap`` when one side is captured (``--capture sender|receiver|router``);
- ``DIR/NAME.sender.pcap`` and ``DIR/NAME.receiver.pcap`` with ``--capture both``;
- ``DIR/NAME.sender.pcap``, ``DIR/NAME.router.pcap`` and ``DIR/NAME.receiver.pcap`` with
  ``--capture all``.

:func:`sidecar_for` finds the sidecar of any of those capture files.  The sidecar lists its
captures by file name (relative to its own directory), so they travel together.

Versioning.  ``"schema": "pcapstats-lab/1"``.  A field may be *added* within a version; a
field renamed, removed or changing meaning makes a new version.  :func:`load_sidecar` refuses a
file without this schema, or with another version, in one line.

Status.  A run that ends normally writes ``"status": "complete"``.  A run stopped by Ctrl-C /
SIGTERM, or failing after its capture started, still stops tcpdump properly (the capture is
flushed and valid up to that moment) and writes ``"interrupted"`` or ``"failed"`` with the error
line.  Captures and sidecar are written under temporary names and renamed into place, the
sidecar last: a run killed outright (SIGKILL, power cut) leaves at most hidden
``.NAME*.partial`` files, never a capture that looks finished.

Every field is listed in :data:`FIELDS` (``pcapstats lab fields`` prints them; captures/README.md
carries the same table).  Times are integer nanoseconds since the epoch (realtime, the clock of
the capture timestamps), so any sample can be placed on the capture's time axis.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import PcapstatsError
from .paths import line_of, read_side_file

SCHEMA = "pcapstats-lab/1"
STATUSES = ("complete", "interrupted", "failed")
CAPTURE_SUFFIXES = (".pcap", ".pcapng")
SIDES = ("sender", "receiver", "router")

# (field, meaning).  "flows[].x" is a field of each element of the list "flows".
FIELDS: tuple[tuple[str, str], ...] = (
    ("schema", f'Always "{SCHEMA}".'),
    ("status", "complete | interrupted (Ctrl-C, SIGTERM) | failed (see error)."),
    ("error", "The one-line error that ended a failed or interrupted run; null when complete."),
    ("command", "The command line that made the run (argv list), null when run from Python."),
    ("started_ns / finished_ns", "Realtime ns when the run began (before the topology) and "
     "when it ended (after the captures stopped)."),
    ("scenario", "Everything asked, as given to pcapstats.lab.Scenario: tool, loss, delay, "
     "jitter, rate, queue (each one value, or one per router with hops > 1), serialize, "
     "one_way, hops, cc, duration_s or bytes, parallel, pairs, start_offset_s (pair K "
     "starts (K - 1) x it after the first), udp_rate, ping_count, ping_interval_s, "
     "ping_sizes, ping_during, sndbuf, rcvbuf, window_scaling, timestamps, sack, app_rate, "
     "capture, snaplen, format, trial, seed (see `pcapstats lab run --help`)."),
    ("tools", "Versions: kernel (uname -r), python, pcapstats, iperf3 (-v), tcpdump and libpcap "
     "(--version), ping (-V), tc (-V), iptables (--version); null for a tool not installed."),
    ("topology.name", "sender_router_receiver (one pair), dumbbell (pairs > 1), chain "
     "(hops > 1: sender - router1 - ... - routerK - receiver) or file (a topology file: "
     "`lab run --topology`, then scenario is null and network, links, paths, pairs say it)."),
    ("topology.network / about / file / routers / hosts", "A topology file's run: its name, "
     "description and path, its routers, and each host's router."),
    ("topology.pairs[]", "Per host pair: sender and receiver host names and their IPv4 "
     "addresses (sender_ip, receiver_ip), and the cc its flows asked for."),
    ("topology.bottleneck", "Where the impairment sits: host and interface (the router's "
     "egress toward the receivers; a chain's first router); null for a topology file (each "
     "link direction has its own: links[].directions[])."),
    ("topology.bottlenecks", "A chain only: every router's impaired link, the sender's side "
     "first."),
    ("topology.window_scaling / timestamps / sack", "net.ipv4.tcp_window_scaling, "
     "tcp_timestamps and tcp_sack set in every sender and receiver namespace (true/false)."),
    ("impairment", "The impairment of the (first) router, in the four fields below."),
    ("impairment.asked", "The impairment as parsed: loss and ack_loss (fractions 0..1), "
     "delay_s and jitter_s (one way, each direction), rate_bps (toward the receivers), "
     "serialize (each packet also waits size/rate, both ways; one_way: toward the receivers "
     "alone), queue_bytes (as given, else null), queue_floor_bytes (the least the default "
     "queue holds: a ping or pingpong run's longest message and two frames), "
     "queue_limit_bytes (the queue set: tbf's limit, the serialising delay line's queue)."),
    ("impairment.mechanisms", "value -> what set it: rate and queue tbf on every host; loss, "
     "ack_loss, delay, jitter, serialisation netem where the kernel has it, else "
     "iptables-statistic (loss) and nfqueue-delayline (the rest)."),
    ("impairment.settings", "The exact settings applied (qdisc parameters, rules, queue "
     "lengths), as reported by the impairment module."),
    ("impairment.counters", "The mechanisms' own counters read after the traffic and before "
     "removal: loss (data / ack: packets offered through the direction's chain, dropped at "
     "random by the DROP rule or by netem, whose dropped_bytes is null; the lab's links have "
     "offloads off, so these are packets as on the wire), qdiscs (the rate's "
     "tbf by interface: drops/overlimits/backlog), netem (its qdiscs by interface), delay "
     "(the delay lines' packets: held, dropped by --loss, packets_overflowed: dropped with "
     "the serialisation queue full, queued_max_bytes: the most bytes waiting for it)."),
    ("hops", "A chain only (null otherwise): one entry per router, the sender's side first: "
     "router, and asked, mechanisms, settings, counters as in impairment.  Link k leaves "
     "router k toward the receiver; the sender's own link is not impaired."),
    ("rtt", "The RTT measured with ping before the transfer: from, to, count, interval_s, "
     "samples_ms (one a reply), median_ms, and asked_ms (2 x delay, over a chain 2 x the sum "
     "of the routers' delays; null without delay)."),
    ("captures[].file", "Capture file name, relative to the sidecar's directory."),
    ("captures[].side", "sender | receiver | router: the sender's own interface (sees every "
     "transmission, before the loss), the receiver's (after the bottleneck), or the router's "
     "interface toward the senders (after the sender, before the impairment).  --capture all "
     "writes one file of each, one pair only."),
    ("captures[].host / interface", "Lab host and interface tcpdump listened on."),
    ("captures[].point", "A topology file's run: the capture point as the file names it "
     "(\"h1\", \"r2:r3\", \"r2:eth1\"); its file is NAME.<point>.pcap (\":\" as \"-\") "
     "when there are several; side is router at a router, sender or receiver at a host that "
     "is only that, else null; impairments' where is before (on this interface's egress) or "
     "elsewhere (another link's: at says which)."),
    ("captures[].phase", "A topology file's run: measure (its measuring pings alone, every "
     "link's and path's, recorded at the point before the traffic: NAME.measure.pcap, or "
     "NAME.measure-<point>.pcap with several points; `pcapstats ping` names each session's "
     "link or path) or traffic (the pairs' traffic, and their pings under load)."),
    ("captures[].snaplen / format / timestamps", "Bytes kept a packet; pcap | pcapng; nano | "
     "micro."),
    ("captures[].packets_captured / packets_received_by_filter / packets_dropped_by_kernel "
     "/ packets_dropped_by_interface", "tcpdump's own report on exit."),
    ("captures[].size_bytes", "File size when written (a resumed matrix checks it)."),
    ("captures[].impairments", "Each impairment placed against this capture point: what "
     "(loss, ack_loss, delay, jitter, rate, serialisation), amount (as said: \"10 %\", "
     "\"5 ms\"), packets (toward the receiver | toward the sender | leaving IFACE), sources "
     "(those packets' source addresses), at (where it sits: \"router eth1, egress\"), where "
     "(before: the capture point sees the packets after it acted -- drops missing, delays "
     "in their times; after: it sees them before), own_egress (on the capturing host's own "
     "output: round trips timed here leave it out).  pcapstats.sidecar.placements reads it."),
    ("flows[]", "One a transport connection or UDP flow the tools made, in the order the "
     "tools reported them."),
    ("flows[].pair / tool", "Host pair index (into topology.pairs, from 0: labels such as "
     "fairness --flows and stream labels say pair K for index K - 1) and the tool that made "
     "it."),
    ("flows[].repeat", "A topology file's run: which of the pair's transfers (from 0)."),
    ("flows[].proto / src / sport / dst / dport", "The 5-tuple, as the sending socket saw it."),
    ("flows[].cc", "Congestion control the sending socket used (read back from the socket by "
     "simpleperf and the file transfer, from iperf3's JSON); null for UDP."),
    ("flows[].streams", "capture file -> tcp.stream (udp.stream for UDP) index the flow has in "
     "that capture: pcapstats' numbering, which equals tshark's; null if not in it."),
    ("flows[].sent_bytes / received_bytes", "Payload bytes the sender wrote / the receiver "
     "read, from the tools' reports."),
    ("flows[].start_ns / end_ns", "Realtime ns of the flow's start and end at the sender."),
    ("flows[].tcp_info", "simpleperf flows: the sending socket's TCP_INFO samples as columns, "
     "{\"t_ns\": [...], \"t_mono_ns\": [...], \"snd_cwnd\": [...], ...}: one list a field of "
     "pcapstats.tools.tcpinfo.SERIES_FIELDS, the kernel's units (rtt in us, cwnd in segments); "
     "the last sample is taken just before the socket closes.  null for other tools."),
    ("flows[].protocol_ok", "simpleperf flows: the server saw 1000-byte messages, BYE, and "
     "answered ACK: BYE."),
    ("flows[].retransmits", "iperf3 TCP flows: retransmissions iperf3 read from TCP_INFO."),
    ("reports[].repeat / under_load", "A topology file's run: which of the pair's transfers "
     "(from 0); true for the pings a pair sent while it sent (ping_during), false for its "
     "tool."),
    ("reports[]", "One a tool run: tool, mode (tcp | udp | icmp), pair (--ping-during: one "
     "ping report a pair, from its sender to its receiver), sender, receiver, "
     "summary (the tool's headline numbers: sent/received bytes, seconds, throughput_bps; "
     "UDP: lost_packets, lost_percent, jitter_ms; iperf3 TCP: target_bps, the app_rate its "
     "-b was given, else null; ping: median_ms per size; file: checksum_ok) "
     "and raw (the tool's own output: iperf3 -J of client and server, simpleperf --report "
     "files without the TCP_INFO series, ping replies, file transfer reports)."),
    ("measured", "Asked vs measured at a glance: rtt_asked_ms, rtt_ms (the pre-transfer "
     "median), rate_asked_bps (a chain: the slowest router's), throughput_bps (every flow's "
     "received bytes over the span from the first start to the last end; iperf3: its "
     "reports' rates added), loss_asked, loss_measured (the loss rule's drops / packets it "
     "was offered, data direction, read the same with netem, packets as on the wire (the "
     "lab's links have offloads off); over a chain, 1 - the product "
     "of what each router kept), retransmitted_segments (sum of the senders' final TCP_INFO "
     "total_retrans, simpleperf only)."),
    ("achieved", "Achieved against asked (pcapstats.lab.accuracy), measured from captures "
     "before and after the path (the run's own where --capture put them there, else the "
     "lab's own headers-only ones, not kept: the hosts share one clock) and from the "
     "counters; null without an impairment.  `pcapstats capture` writes it too, from its "
     "capture and counters."),
    ("network", "A topology file's run: the file's TOML as run (a matrix cell's values "
     "set), and file, its path."),
    ("links[]", "A topology file's run: one a link, host links first (each host's eth0), "
     "then the file's [[link]]s: name (\"r1-r2\"), ends, addresses (node -> IPv4 address "
     "on it, 10.77.<link>.1 and .2), interfaces (node -> its interface on it)."),
    ("links[].directions[]", "Each direction, first end to second then back: from, to, "
     "asked_text (the values as written), and where impaired: router and interface (the "
     "egress it leaves by), asked, mechanisms, settings, counters as in impairment (data: "
     "this direction; its router's own packets, its pings, meet it too); else null."),
    ("links[].ping", "Pings from its first end to its second's address on it: base_ms (the "
     "median RTT before any impairment: the veths and forwarding, the per-router cost; not "
     "captured), and with the impairments on, in the measure captures: from, to, address, "
     "ident (the ICMP identifier its echoes carry: 0x7000 + its index in links[]), asked_ms "
     "(the two directions' delays), count, interval_s, received, samples_ms (ping's own "
     "report, one a reply), median_ms, min_ms, reported (ping's own summary lines: "
     "transmitted, received, min_ms, avg_ms, max_ms, mdev_ms); null with run.measure "
     "false."),
    ("paths[]", "A topology file's run: one a pair, its route: pair, label (\"pair K\"), "
     "from, to, nodes (the shortest path of the graph), links (their names), asked (delay_ms "
     "toward the receiver, delay_back_ms, rtt_ms: the sum, bottleneck_bps and "
     "bottleneck_link: the slowest link toward the receiver), ping (pings from sender to "
     "receiver, as links[].ping, ident 0x7800 + pair index, with base_ms and links_ms: the "
     "sums of its links')."),
    ("pairs[]", "A topology file's run: each pair as asked (pair, label, from, to, tool, "
     "parallel, cc, start_s, duration_s, bytes, udp_rate, app_rate, repeat, gap_s, "
     "ping_during) and achieved: transfers (done), goodput_bps (the tool's received rate, "
     "the mean over its transfers), rtt_under_load_ms (the median of its pings under load), "
     "lost_packets and lost_percent (iperf3 UDP's own count)."),
    ("achieved.checks[]", "One a quantity and direction: quantity (rate | delay | loss | "
     "queue | rtt), direction (toward the receiver | toward the sender | out of the "
     "interface | null; a topology file's: link A-B, link A→B, path A→B, pair K A→B), asked, achieved (null: not measured, why_not says why), low / high (a rate's "
     "95 % interval: the trains' median's order statistics), unit (bit/s | ms | fraction | "
     "bytes), tolerance (text), in_spec (true | false | null: not measured), how (from "
     "what), and trains (rate), dropped / offered (loss), drops (queue)."),
    ("achieved.checks[]: rate", "The bottleneck's dispersion: packets that reached the path "
     "before the one ahead had left it waited, so left back to back; their runs, cut in "
     "trains of 50 packets and 5 ms at least carrying 10 full frames, timed as the delay "
     "model times its answers (their first two skipped: a token bucket's burst); the "
     "median.  Within 10 % of the asked rate (the data direction's, or the serialisation's "
     "each way)."),
    ("achieved.checks[]: delay", "The median one-way delay of the packets that did not wait, "
     "less their serialisation where the direction serialises; within 10 % + 0.5 ms of the "
     "asked (a chain: the routers' sum).  A capture: the delay line's delay plus how late it "
     "released packets on average."),
    ("achieved.checks[]: loss", "The loss rule's drops over the packets it was offered (a "
     "capture: the delay line's counts of packets on the wire); within 4.5 binomial "
     "standard deviations of the asked share (a chain: 1 - the product of what each keeps)."),
    ("achieved.checks[]: queue", "The most bytes a packet toward the receiver found ahead of it "
     "(itself included), against the slowest router's queue_limit_bytes: at most 10 % + two "
     "frames over it, and where the queue dropped (tbf, the delay line's full queue) at least "
     "80 % of it less two frames.  Not measured by a capture (it sees packets after the "
     "queue only)."),
    ("achieved.checks[]: rtt", "A topology file's run: a link's median ping against its two "
     "delays plus its base, within 1 ms; a path's against the sum of its links', within 2 "
     "ms.  And rate, per pair: iperf3 UDP offered above its path's slowest link delivers "
     "that link's rate, within 10 %."),
    ("achieved.in_spec", "true when every check measured is within its tolerance, false when "
     "one is not (the run is out of spec), null when none could be measured."),
    ("achieved.out_of_spec", "One line a check out of spec (\"rate toward the receiver 11.2 "
     "Mbit/s, asked 20.0 Mbit/s (within ±10 %)\")."),
    ("achieved.retried_after", "A matrix cell run a second time: the first attempt's "
     "out_of_spec lines; else null."),
    ("achieved.error", "Why nothing could be measured (a capture that could not be read), "
     "else null."),
)


class SidecarError(PcapstatsError):
    """A sidecar that cannot be read: missing, not JSON, or not this schema version."""


# -- names ------------------------------------------------------------------------------------

def run_stem(output: str | os.PathLike) -> Path:
    """``runs/x.pcap`` -> ``runs/x``: what a run's file names are made from."""
    output = Path(output)
    if not output.name:                  # "", ".", "/": no file, so no run of that name
        return output / "-"
    return output.with_suffix("") if output.suffix in CAPTURE_SUFFIXES else output


def sidecar_path(output: str | os.PathLike) -> Path:
    """The sidecar of the run asked to write ``output``: ``runs/x.pcap`` -> ``runs/x.json``."""
    stem = run_stem(output)
    return stem.with_name(stem.name + ".json")


def capture_path(output: str | os.PathLike, side: str | None, fmt: str) -> Path:
    """A run's capture file: ``x.pcap`` for a single side (None), else ``x.<side>.pcap`` (capture
    both or all)."""
    stem = run_stem(output)
    middle = f".{side}" if side else ""
    return stem.with_name(f"{stem.name}{middle}.{fmt}")


def partial_path(final: Path) -> Path:
    """Where a file is written before it is renamed into place (hidden, clearly unfinished)."""
    return final.with_name(f".{final.name}.partial")


def sidecar_for(capture: str | os.PathLike) -> Path:
    """The sidecar describing a capture file (x.pcap, x.sender.pcap ... -> x.json)."""
    capture = Path(capture)
    stem = run_stem(capture)
    direct = sidecar_path(stem)
    if os.path.exists(direct):          # False for a name too long, never an OSError
        return direct
    base, _, side = stem.name.rpartition(".")
    if base and (side in SIDES or stem.with_name(base + ".json").exists()):
        return stem.with_name(base + ".json")   # x.<side>.pcap, a topology's x.<point>.pcap
    return direct


# -- reading ----------------------------------------------------------------------

_SCHEMA_RE = re.compile(r"^pcapstats-lab/(\d+)$")


def load_sidecar(path: str | os.PathLike) -> dict:
    """The sidecar as a dict, after checking it is one this version of pcapstats reads."""
    path = Path(path)
    if not os.path.exists(path):
        raise SidecarError("no sidecar here", path=str(path),
                           hint="a lab run writes NAME.json beside NAME.pcap")
    text = read_side_file(path, "sidecar", SidecarError)     # a regular file, a few MB at most
    try:
        data = json.loads(text)
    except RecursionError:
        raise SidecarError("not a sidecar: JSON nested too deep", path=str(path)) from None
    except json.JSONDecodeError as e:
        raise SidecarError(f"not JSON (line {e.lineno}, column {e.colno}: {e.msg})",
                           path=str(path), hint="a lab sidecar is JSON; re-run to remake it"
                           ) from None
    if not isinstance(data, dict):
        raise SidecarError(f"not a pcapstats lab sidecar (no \"schema\" field: a JSON "
                           f"{type(data).__name__}, not an object)", path=str(path),
                           hint="a lab run writes NAME.json beside NAME.pcap")
    schema = data.get("schema")
    if schema is None:
        raise SidecarError("not a pcapstats lab sidecar (no \"schema\" field)", path=str(path))
    if schema != SCHEMA:
        m = _SCHEMA_RE.match(str(schema))
        if m is None:
            raise SidecarError(f"unknown sidecar schema {schema!r}", path=str(path),
                               hint=f"this pcapstats reads {SCHEMA}")
        raise SidecarError(f"sidecar schema {schema} is not the {SCHEMA} this pcapstats reads",
                           path=str(path), hint="use the pcapstats version that wrote it, or "
                           "re-run the scenario to remake it")
    missing = [k for k in ("status", "scenario", "captures", "flows") if k not in data]
    if missing:
        raise SidecarError(f"sidecar lacks {', '.join(missing)}", path=str(path),
                           hint="it was not written by a lab run; re-run to remake it")
    for key, kind in (("scenario", dict), ("captures", list), ("flows", list)):
        value = data[key]
        if value is None and key == "scenario":      # `pcapstats capture`: nothing was asked
            continue
        if not isinstance(value, kind) or (kind is list and not all(
                isinstance(item, dict) for item in value)):
            raise SidecarError(f"field {key!r} at line {line_of(text, key)} is not "
                               f"{'an object' if kind is dict else 'a list of objects'}",
                               path=str(path), hint="re-run the scenario to remake it")
    if not isinstance(data["status"], str) or data["status"] not in STATUSES:
        raise SidecarError(f"unknown run status {data['status']!r} (field 'status' at line "
                           f"{line_of(text, 'status')})", path=str(path))
    return data


def is_complete(path: str | os.PathLike) -> bool:
    """True when the sidecar loads, says complete, and every capture it lists is there whole."""
    path = Path(path)
    try:
        data = load_sidecar(path)
    except SidecarError:
        return False
    if data["status"] != "complete":
        return False
    for cap in data["captures"]:
        file = path.parent / cap["file"]
        if not file.is_file() or file.stat().st_size != cap.get("size_bytes"):
            return False
    return True


def describe_markdown() -> str:
    """FIELDS as the markdown table captures/README.md carries."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")
    rows = [f"| `{name}` | {cell(meaning)} |" for name, meaning in FIELDS]
    return "\n".join(["| field | meaning |", "|---|---|", *rows])


def stream_flows(capture: str | os.PathLike) -> dict[tuple[str, int], dict]:
    """(proto, stream) -> the lab's flow record for it (cc, pair, tool, ...), from the sidecar
    beside the capture; empty when there is none (or it cannot be read)."""
    capture = Path(capture)
    try:
        doc = load_sidecar(sidecar_for(capture))
    except SidecarError:
        return {}
    out = {}
    for flow in doc.get("flows") or []:
        sid = (flow.get("streams") or {}).get(capture.name)
        if sid is not None:
            out[(flow.get("proto"), int(sid))] = {**flow, "pairs": len(
                (doc.get("topology") or {}).get("pairs") or [])}
    return out


@dataclass(frozen=True)
class MeasuringPing:
    """A ping session a topology file's run measured with: ``label`` "link r1-r2" (its first
    end to its second) or "path h1-h4" (a pair's sender to its receiver); ``sender`` the node
    that pinged; ``side`` the capture's side for it, in schema.CAPTURE_POINTS' words (sender:
    the capture is at the node that pinged, receiver: at the node pinged, middle: at a node
    between; None: not on its way), said in ``side_evidence``; ``unseen``: the impairments on the capture point's own
    interface that act on its requests before tcpdump sees them, when the capture is at the
    requester's interface (a router's egress: its delay is not in the request -> reply times
    there); ``reported_avg_ms`` the avg RTT ping itself reported."""
    label: str
    sender: str
    side: str | None
    side_evidence: str
    unseen: tuple["Placement", ...] = ()
    reported_avg_ms: float | None = None


def measuring_pings(capture: str | os.PathLike) -> dict[tuple[str, str, int], MeasuringPing]:
    """(requester address, responder address, ICMP identifier) -> what a topology file's run
    measured with that ping session, from the sidecar beside the capture (its links[].ping and
    paths[].ping); empty without one, or for a run that measured nothing."""
    capture = Path(capture)
    try:
        doc = load_sidecar(sidecar_for(capture))
    except SidecarError:
        return {}
    pairs = (doc.get("topology") or {}).get("pairs") or []
    here = next((c for c in doc.get("captures") or [] if c.get("file") == capture.name), {})
    at = here.get("host")
    before = tuple(p for p in placements(capture) if p.where == "before"
                   and p.what in ("delay", "jitter", "rate", "serialisation"))

    def side(nodes: list) -> tuple[str | None, str]:
        where = ("sender" if at == nodes[0] else "receiver" if at == nodes[-1]
                 else "middle" if at in nodes else None)
        return where, f"{nodes[0]} pinged {nodes[-1]}, this capture is at {at}"

    out = {}
    for link in doc.get("links") or []:
        ping = link.get("ping") or {}
        if ping.get("ident") is not None:
            sender = ping["from"]
            mine = at == sender and here.get("interface") == (link.get("interfaces") or
                                                              {}).get(sender)
            out[(link["addresses"][sender], ping["address"], int(ping["ident"]))] = \
                MeasuringPing(f"link {link['name']}", sender, *side([sender, ping["to"]]),
                              before if mine else (), (ping.get("reported") or {}).get("avg_ms"))
    for path in doc.get("paths") or []:
        ping = path.get("ping") or {}
        if ping.get("ident") is not None and path["pair"] < len(pairs):
            out[(pairs[path["pair"]]["sender_ip"], ping["address"], int(ping["ident"]))] = \
                MeasuringPing(f"path {path['from']}-{path['to']}", path["from"],
                              *side(path["nodes"]), (),
                              (ping.get("reported") or {}).get("avg_ms"))
    return out


def iperf3_udp_reports(capture: str | os.PathLike) -> dict[int, dict]:
    """udp.stream -> what iperf3's server reported of that UDP flow of the capture (from the
    lab sidecar beside it: the server's own -J output, the stream whose socket the flow's
    source port connected): ``packets``, ``lost_packets``, ``out_of_order``, ``jitter_ms``;
    empty without a sidecar (or one that cannot be read) or iperf3 UDP runs."""
    capture = Path(capture)
    try:
        doc = load_sidecar(sidecar_for(capture))
    except SidecarError:
        return {}
    servers = {r.get("pair"): ((r.get("raw") or {}).get("server") or {})
               for r in doc.get("reports") or [] if r.get("tool") == "iperf3"
               and r.get("mode") == "udp"}
    out = {}
    for flow in doc.get("flows") or []:
        stream = (flow.get("streams") or {}).get(capture.name)
        server = servers.get(flow.get("pair"))
        if stream is None or flow.get("proto") != "udp" or not server:
            continue
        sockets = [c.get("socket") for c in (server.get("start") or {}).get("connected") or []
                   if c.get("remote_port") == flow.get("sport")
                   and c.get("remote_host") == flow.get("src")]
        for s in (server.get("end") or {}).get("streams") or []:
            udp = s.get("udp") or {}
            if sockets and udp.get("socket") == sockets[0]:
                out[int(stream)] = {k: udp.get(k) for k in ("packets", "lost_packets",
                                                           "out_of_order", "jitter_ms")}
    return out


def asked_rate_bps(capture: str | os.PathLike) -> float | None:
    """The bottleneck rate asked of the run that made the capture (a lab run's
    measured.rate_asked_bps: a chain's slowest router; `pcapstats capture`: its impairment's
    rate_bps); None without a sidecar (or one that cannot be read) or a rate."""
    try:
        doc = load_sidecar(sidecar_for(capture))
    except SidecarError:
        return None
    rate = (doc.get("measured") or {}).get("rate_asked_bps")
    if rate is None:
        rate = ((doc.get("impairment") or {}).get("asked") or {}).get("rate_bps")
    return float(rate) if isinstance(rate, (int, float)) and rate > 0 else None


def asked_queue_bytes(capture: str | os.PathLike) -> float | None:
    """The bottleneck queue's limit the run that made the capture set, in bytes (a lab run's
    impairment.asked.queue_limit_bytes; `pcapstats capture`: its queue_bytes); None without a
    sidecar (or one that cannot be read) or a queue."""
    try:
        doc = load_sidecar(sidecar_for(capture))
    except SidecarError:
        return None
    asked = (doc.get("impairment") or {}).get("asked") or {}
    queue = asked.get("queue_limit_bytes", asked.get("queue_bytes"))
    return float(queue) if isinstance(queue, (int, float)) and queue > 0 else None


@dataclass(frozen=True)
class Placement:
    """One impairment the run that made a capture applied, placed against that capture's point
    (the sidecar's ``captures[].impairments``): what, how much, on which packets (their
    direction and source addresses), where it sits, and whether the capture point sees the
    packets after it acted (``where`` "before") or before (``where`` "after")."""
    what: str                     # loss, ack_loss, delay, jitter, rate, serialisation
    amount: str                   # as said: "10 %", "20 ms", "20 Mbit/s"
    packets: str                  # "toward the receiver", "toward the sender", "leaving eth0"
    sources: tuple[str, ...]      # those packets' source addresses
    where: str                    # "before" or "after" the capture point, on those packets
    at: str                       # "router eth1, egress", "this host's eth0, egress"
    own_egress: bool              # on the capturing host's own output path

    @property
    def unseen_by_round_trips(self) -> bool:
        """A round trip timed at this capture point leaves it out: it acts on what the
        capturing host sends before the capture point sees it (tcpdump's tap is after
        netfilter and the qdisc), so a request is timed from after its delay, its rate."""
        return self.where == "before" and self.own_egress

    @property
    def after_capture(self) -> bool:
        """It acts after the capture point saw the packets: a drop is not missing here, a delay
        is not in these packets' times (a round trip coming back through here still holds
        it)."""
        return self.where == "after"

    def text(self) -> str:
        """"20 ms delay on this host's eth0, egress"."""
        return f"{self.amount} {self.what.replace('_', ' ')} on {self.at}"


def placements(capture: str | os.PathLike) -> list[Placement]:
    """The impairments of the run that made ``capture``, each placed against its capture point
    (the one reading side of ``captures[].impairments``, for the analyses to know which
    impairments their numbers leave out); empty without a sidecar (or one that cannot be
    read), without impairments, or a sidecar written before the field."""
    capture = Path(capture)
    path = sidecar_for(capture)
    try:
        stat = path.stat()
    except OSError:
        return []
    return list(_placements(str(path), stat.st_mtime_ns, stat.st_size).get(capture.name, ()))


@functools.lru_cache(maxsize=16)
def _placements(path: str, mtime_ns: int, size: int) -> dict[str, tuple[Placement, ...]]:
    """Every capture's placements of one sidecar, read once while it is unchanged (a per-stream
    analysis asks once a stream)."""
    try:
        doc = load_sidecar(path)
    except SidecarError:
        return {}
    return {entry.get("file"): tuple(
        Placement(p["what"], p["amount"], p["packets"], tuple(p["sources"]), p["where"],
                  p["at"], bool(p["own_egress"])) for p in entry.get("impairments") or [])
        for entry in doc.get("captures") or []}


def stream_labels(capture: str | os.PathLike) -> dict[tuple[str, int], str]:
    """(proto, stream) -> what the lab ran on it ("reno, pair 1, simpleperf"), from the sidecar
    beside the capture; empty when there is none (or it cannot be read)."""
    out = {}
    for key, flow in stream_flows(capture).items():
        words = [flow.get("cc"), f"pair {flow['pair'] + 1}" if flow["pairs"] > 1 and
                 flow.get("pair") is not None else None, flow.get("tool")]
        out[key] = ", ".join(w for w in words if w)
    return out


# -- kind "capture": `pcapstats capture`'s sidecar ----------------------------------------------
# The same schema and reading side as a lab run's: a sidecar with "kind": "capture" (a lab
# run's has no "kind") carries the lab's status, error, command, started_ns / finished_ns and
# captures[] with the same meanings, "scenario": null and "flows": [] (so every reader of lab
# sidecars takes it), and the fields below.  `pcapstats capture --fields` prints them.
KINDS = ("run", "capture")
CAPTURE_FIELDS: tuple[tuple[str, str], ...] = (
    ("kind", '"capture": written by `pcapstats capture` (a lab run\'s sidecar has no kind).'),
    ("status", "complete | interrupted (Ctrl-C, SIGTERM or SIGHUP while a command or a "
     "--duration was running; without either, that is the normal end: complete) | failed "
     "(see error: tcpdump failed, or the delay line died so the delay was not the one asked). "
     "The command's own result is run.exit_status, not the status."),
    ("interface", "name, ifindex, mtu, netns (inode of the network namespace), host "
     "(hostname), addresses (its IP addresses), qdiscs_before (tc's line for every qdisc on "
     "it before the capture) and "
     "pcapstats_before (a pcapstats setting already there: owner, pid, asked; else null)."),
    ("impairment", "null when none was asked; else the fields below."),
    ("impairment.asked", "loss (fraction), delay_s and jitter_s (one way, on the interface's "
     "egress only), rate_bps, queue_bytes (the default: one BDP, at least 64 full frames)."),
    ("impairment.mechanisms", "value -> what set it: tbf (rate, queue) on every host; netem "
     "(loss, delay, jitter) where the kernel has it, else nfqueue-delayline (the delay line "
     "drops with NF_DROP, a real loss also for this host's own packets)."),
    ("impairment.settings", "The parameters: netem (limit_packets, spec), tbf (rate_bps, "
     "burst_bytes, limit_bytes), iptables (table mangle, hook POSTROUTING, match -o IFACE, "
     "chain PCAPSTATS-<hex>, tools, comment), delay_line (queue, pid, bypass)."),
    ("impairment.commands", "Every command that installed it, in order, exactly as run."),
    ("impairment.limits", "mechanism -> what it cannot do on this host's own traffic "
     "(measured; see pcapstats.lab.impair.host)."),
    ("impairment.counters", "Read just before removal: loss (offered_packets / offered_bytes "
     "through the chain's jump, IPv4 + IPv6, as netfilter sees them: this host's own TCP in "
     "GSO bursts of up to 64 kB; dropped_packets by the delay line, or by netem less its "
     "tbf's; packets_on_wire: the packets the delay line was handed, each as on the wire -- "
     "NFQUEUE hands a GSO burst over segmented -- null with netem, whose drops and the jump "
     "both count bursts: the loss reported is dropped_packets / packets_on_wire, else / "
     "offered_packets), qdisc (the rate's tbf: kind, handle, sent_bytes, sent_packets, "
     "dropped_packets, "
     "overlimits, backlog_bytes, backlog_packets), netem (the same for netem), delay_line "
     "(queue, pid, alive, kernel: its /proc/net/netfilter/nfnetlink_queue line, program: the "
     "delay line's final stats)."),
    ("impairment.problems", "Why the impairment was not the one asked (the delay line died, "
     "its queue overflowed); empty when it was."),
    ("impairment.removed", "What removal did, one line per item."),
    ("captures[].side", "null: a live capture is of everything crossing the interface."),
    ("captures[].impairments", "The impairment placed against the capture point, as in a "
     "lab run's: everything on the interface's egress acts before tcpdump sees the packets "
     "leaving it (where before, own_egress true: round trips timed here leave it out)."),
    ("captures[].host / interface", "Hostname and the interface tcpdump listened on."),
    ("captures[].filter", "The capture filter (BPF) given with --filter, or null."),
    ("captures[].tcpdump", "tcpdump's command line, exactly as run."),
    ("captures[].packets_captured / packets_received_by_filter / packets_dropped_by_kernel "
     "/ packets_dropped_by_interface", "tcpdump's own report on exit.  Drops by the kernel "
     "are a warning, not a failure, here."),
    ("run.argv", "The command run during the capture (after --), or null."),
    ("run.pid", "Its process id."),
    ("run.duration_s", "--duration, or null."),
    ("run.started_ns / run.ended_ns", "Realtime ns when the command was started (tcpdump "
     "was listening by then) and when it was seen to end."),
    ("run.exit_status", "The command's exit status, 128 + N when signal N ended it (as a "
     "shell says it); pcapstats exits with it."),
    ("run.signal", "The signal that ended the command (SIGINT...), or null."),
    ("run.stopped_by", "What ended the capture: command, duration, SIGINT, SIGTERM, SIGHUP or "
     "error."),
    ("tools", "Versions, as a lab run's sidecar has them."),
    ("achieved", "Achieved against asked, as in a lab run's (`pcapstats lab fields`): the rate "
     "from the dispersion of what left the interface (packets closer than twice their "
     "serialisation at the asked rate are back to back), the delay from the delay line's "
     "count, the loss from packets on the wire; the queue is not measured.  null without an "
     "impairment."),
)
