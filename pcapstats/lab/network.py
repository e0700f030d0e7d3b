"""A topology file: routers, hosts, links with per-direction impairments, the traffic between
host pairs and the capture points, read and checked before anything is built (the lab's
``--topology FILE``; ``topologies/seed000.toml`` documents every field).

    net = load("topologies/seed000.toml")
    net.path("h1", "h9")        # ["h1", "r1", "r2", "r3", "r4", "h9"]: routes from the graph
    net.links_on(["h1", "r1", "r2"])

Addresses (IPv4 only): link i (1-based, host links first in the order of ``[hosts]``, then
``[[link]]`` in file order) is 10.77.i.0/24, its first end .1, its second .2; a host's link to
its router is its eth0.  Each node names its interfaces eth0, eth1 ...
in that order.  Routes are the shortest paths of the graph (fewest hops, ties to the link
listed first): each router gets one to every link's subnet it is not on, each host a default
route via its router.
"""

from __future__ import annotations

import copy
import math
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from pcapstats.errors import PcapstatsError, UsageError
from pcapstats.lab.impair.mechanisms import Impairment
from pcapstats.lab.run import Scenario
from pcapstats.lab.specfile import bad_field, read

MAX_NODES = 64
MAX_PAIRS = 32
MAX_REPEAT = 1000
MAX_LINKS = 250          # link i is 10.77.i.0/24
NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,9}$")  # short: it goes into namespace names
LINK_VALUES = ("rate", "delay", "jitter", "loss", "queue")
TOOLS = ("simpleperf", "iperf3", "iperf3-udp", "ping", "pingpong", "pingpong-udp", "tcp-file",
         "udp-file")
KEYS = {"name", "about", "routers", "hosts", "link", "pair", "run"}
RUN_KEYS = {"duration_s": float, "capture": list, "measure": bool, "ping_count": int,
            "ping_interval_s": float, "snaplen": int, "format": str, "seed": int}
PAIR_KEYS = {"from": str, "to": str, "tool": str, "parallel": int, "cc": str,
             "start_s": float, "duration_s": float, "bytes": str, "udp_rate": str,
             "app_rate": str, "repeat": int, "gap_s": float, "ping_during": bool,
             "ping_sizes": list, "ping_count": int, "ping_interval_s": float}
KINDS = {str: "text", int: "a whole number", float: "a number", bool: "true or false",
         list: "a list"}


@dataclass(frozen=True)
class Direction:
    """One direction of a link: what leaves ``sender`` toward ``receiver``."""
    sender: str
    receiver: str
    asked: dict  # the texts as written: rate, delay, jitter, loss, queue (absent: none)
    impairment: Impairment

    @property
    def impaired(self) -> bool:
        return bool(self.asked)


@dataclass(frozen=True)
class Link:
    """Two nodes joined by a veth pair; ``number`` gives its subnet 10.77.<number>.0/24."""
    number: int
    ends: tuple[str, str]
    directions: tuple[Direction, Direction]  # ends[0] -> ends[1], then back

    @property
    def name(self) -> str:
        return f"{self.ends[0]}-{self.ends[1]}"

    def address(self, node: str) -> str:
        return f"10.77.{self.number}.{self.ends.index(node) + 1}"

    def toward(self, receiver: str) -> Direction:
        return self.directions[0] if self.directions[0].receiver == receiver else \
            self.directions[1]


@dataclass(frozen=True)
class Pair:
    """One traffic pair: a tool from ``sender`` to ``receiver``, as the file asked it."""
    index: int  # 0-based, in file order; shown as "pair index + 1"
    sender: str
    receiver: str
    tool: str = "iperf3"
    parallel: int = 1
    cc: str | None = None
    start_s: float = 0.0
    duration_s: float | None = None  # None: the run's
    bytes: str | None = None
    udp_rate: str | None = None
    app_rate: str | None = None
    repeat: int = 1
    gap_s: float = 1.0
    ping_during: bool = False
    ping_sizes: tuple[int, ...] = (56,)
    ping_count: int | None = None  # None: the run's
    ping_interval_s: float | None = None

    @property
    def label(self) -> str:
        return f"pair {self.index + 1}"


@dataclass
class Network:
    """A topology file, checked: the graph, its links' impairments, its pairs, its captures."""
    file: Path
    name: str
    about: str
    routers: list[str]
    hosts: dict[str, str]  # host -> its router
    links: list[Link]
    pairs: list[Pair]
    duration_s: float = 10.0
    capture: list[str] = field(default_factory=list)
    measure: bool = True
    ping_count: int = 10
    ping_interval_s: float = 0.1
    snaplen: int = 262144
    format: str = "pcap"
    seed: int = 0
    source: dict = field(default_factory=dict)  # the file's TOML, overrides applied

    # -- the graph --------------------------------------------------------------------------
    @property
    def nodes(self) -> list[str]:
        return [*self.routers, *self.hosts]

    def neighbours(self, node: str) -> list[tuple[str, Link]]:
        return [(link.ends[1 - link.ends.index(node)], link) for link in self.links
                if node in link.ends]

    def path(self, src: str, dst: str) -> list[str]:
        """The nodes from src to dst: a shortest path (fewest hops; ties to earlier links)."""
        before = {src: None}
        todo = deque([src])
        while todo:
            node = todo.popleft()
            if node == dst:
                break
            for peer, _ in self.neighbours(node):
                if peer not in before and (peer not in self.hosts or peer == dst):
                    before[peer] = node
                    todo.append(peer)
        if dst not in before:
            raise UsageError(f"no path from {src} to {dst}", path=str(self.file))
        out = [dst]
        while out[-1] != src:
            out.append(before[out[-1]])
        return out[::-1]

    def link_between(self, a: str, b: str) -> Link:
        for link in self.links:
            if set(link.ends) == {a, b}:
                return link
        raise KeyError((a, b))

    def links_on(self, nodes: list[str]) -> list[Direction]:
        """The link directions a packet meets along ``nodes``."""
        return [self.link_between(a, b).toward(b) for a, b in zip(nodes, nodes[1:])]

    def routes(self) -> dict[str, list[tuple[str, str]]]:
        """node -> (destination prefix, next hop address) its namespace needs (hosts: a
        default route via their router)."""
        out: dict[str, list[tuple[str, str]]] = {}
        for host, router in self.hosts.items():
            out[host] = [("default", self.link_between(host, router).address(router))]
        for router in self.routers:
            mine = []
            for link in self.links:
                if router in link.ends:
                    continue
                target = link.ends[0] if link.ends[0] in self.routers else link.ends[1]
                nodes = self.path(router, target)
                hop = self.link_between(nodes[0], nodes[1]).address(nodes[1])
                mine.append((f"10.77.{link.number}.0/24", hop))
            out[router] = mine
        return out

    def interface_names(self) -> dict[tuple[str, str], str]:
        """(node, peer) -> the node's interface toward peer: eth<k>, k counting the node's
        links in link order (as the lab names them)."""
        count: dict[str, int] = {}
        out = {}
        for link in self.links:
            for k, node in enumerate(link.ends):
                out[(node, link.ends[1 - k])] = f"eth{count.get(node, 0)}"
                count[node] = count.get(node, 0) + 1
        return out

    def capture_point(self, point: str) -> tuple[str, str]:
        """(node, interface) of a capture point: "h1" (a host's eth0), "r2:eth1" or "r2:r3"
        (r2's interface toward r3)."""
        names = self.interface_names()
        node, _, iface = point.partition(":")
        if node not in self.nodes:
            raise UsageError(f"run.capture: {point!r} names no node of the topology",
                             path=str(self.file), hint=f"nodes: {', '.join(self.nodes)}")
        if not iface:
            if node in self.routers:
                raise UsageError(f"run.capture: {point!r} is a router: name its interface",
                                 path=str(self.file), hint=f"e.g. {node}:{self._first(node)}")
            return node, "eth0"
        if iface in self.nodes:
            if (node, iface) not in names:
                raise UsageError(f"run.capture: {node} has no link to {iface}",
                                 path=str(self.file))
            return node, names[(node, iface)]
        mine = sorted(v for (n, _), v in names.items() if n == node)
        if iface not in mine:
            raise UsageError(f"run.capture: {node} has no interface {iface!r}",
                             path=str(self.file), hint=f"{node} has {', '.join(mine)}, or "
                             f"name its peer: {node}:{self._first(node)}")
        return node, iface

    def _first(self, node: str) -> str:
        return self.neighbours(node)[0][0]


def capture_label(point: str) -> str:
    """A capture point as a file name's part: "r2:eth1" -> "r2-eth1"."""
    return point.replace(":", "-")


# -- reading ----------------------------------------------------------------------------------

def load(path: str | Path, overrides: dict | None = None) -> Network:
    """The topology file, checked; ``overrides`` (a matrix cell's: "link.r2-r3.rate",
    "pair.1.cc", "run.duration_s") laid over it first."""
    path = Path(path)
    doc, text = read(path, "topology file")
    if overrides:
        doc = copy.deepcopy(doc)
        for key, value in overrides.items():
            _override(doc, key, value, path, text)
    return _Checker(path, text).network(doc)


def checked(doc: dict, path: str | Path) -> Network:
    """A topology given as the dict its file would parse to (``path``: where errors point,
    and where relative names are read from)."""
    return _Checker(Path(path), "").network(copy.deepcopy(doc))


def _override(doc: dict, key: str, value, path: Path, text: str) -> None:
    """Set one matrix axis value: "link.A-B.FIELD", "pair.K.FIELD" (K from 1), "run.FIELD"."""
    parts = key.split(".")
    expected = ("link.A-B.FIELD (A-B a link's ends), pair.K.FIELD (K from 1) or run.FIELD")
    if parts[0] == "run" and len(parts) == 2:
        doc.setdefault("run", {})[parts[1]] = value
        return
    if parts[0] == "link" and len(parts) == 3:
        for link in doc.get("link") or []:
            ends = link.get("ends") if isinstance(link, dict) else None
            if isinstance(ends, list) and parts[1] in ("-".join(map(str, ends)),
                                                       "-".join(map(str, ends[::-1]))):
                link[parts[2]] = value
                return
        raise bad_field(path, text, f"axes.{key}", f"a link of the topology ({parts[1]!r} is "
                        "none)")
    if parts[0] == "pair" and len(parts) == 3 and parts[1].isdigit():
        pairs = doc.get("pair") or []
        k = int(parts[1])
        if not 1 <= k <= len(pairs):
            raise bad_field(path, text, f"axes.{key}", f"pair 1 to {len(pairs)}")
        pairs[k - 1][parts[2]] = value
        return
    raise UsageError(f"axes.{key}: expected {expected}", path=str(path))


class _Checker:
    """Reads one topology file's TOML into a :class:`Network`, each wrong value one line."""

    def __init__(self, path: Path, text: str):
        self.path, self.text = path, text

    def bad(self, field_name: str, expected: str, value=None) -> UsageError:
        return bad_field(self.path, self.text, field_name, expected, value)

    def typed(self, value, kind, field_name: str):
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if kind is int and isinstance(value, bool) or not isinstance(value, kind):
            raise self.bad(field_name, KINDS[kind], value)
        if kind is float and not math.isfinite(value):
            raise self.bad(field_name, "a finite number", value)
        return value

    def name_of(self, value, field_name: str) -> str:
        if not isinstance(value, str) or not NAME_RE.match(value):
            raise self.bad(field_name, "a node name: a lower-case letter, then up to 9 "
                           "letters or digits", value)
        return value

    def network(self, doc: dict) -> Network:
        unknown = sorted(set(doc) - KEYS)
        if unknown:
            raise self.bad(unknown[0], f"one of the keys {', '.join(sorted(KEYS))}")
        routers = [self.name_of(r, f"routers[{k}]")
                   for k, r in enumerate(self.typed(doc.get("routers", []), list, "routers"))]
        hosts_doc = self.typed(doc.get("hosts", {}), dict, "hosts")
        hosts = {self.name_of(h, f"hosts.{h}"): self.typed(r, str, f"hosts.{h}")
                 for h, r in hosts_doc.items()}
        seen = set()
        for node in [*routers, *hosts]:
            if node in seen:
                raise self.bad(node, "each node named once (it is a router and a host, or "
                               "listed twice)")
            seen.add(node)
        if not routers or not hosts:
            raise self.bad("routers" if not routers else "hosts",
                           "at least one router and one host: routers = [\"r1\"], "
                           "[hosts] h1 = \"r1\"")
        if len(seen) > MAX_NODES:
            raise self.bad("hosts", f"at most {MAX_NODES} nodes in all")
        for h, r in hosts.items():
            if r not in routers:
                raise self.bad(f"hosts.{h}", "the router the host hangs on, one of "
                               f"{', '.join(routers)}", r)
        links = self.links(doc.get("link", []), routers, hosts)
        run = self.typed(doc.get("run", {}), dict, "run")
        for key in run:
            if key not in RUN_KEYS:
                raise self.bad(f"run.{key}", f"one of {', '.join(RUN_KEYS)}")
            self.typed(run[key], RUN_KEYS[key], f"run.{key}")
        net = Network(self.path, self.typed(doc.get("name", self.path.stem), str, "name"),
                      self.typed(doc.get("about", ""), str, "about"), routers, hosts, links,
                      [], source=doc)
        for key, value in run.items():
            setattr(net, key, value)
        self.run_values(net)
        pairs = self.typed(doc.get("pair", []), list, "pair")
        if len(pairs) > MAX_PAIRS:
            raise self.bad("pair", f"at most {MAX_PAIRS} pairs")
        net.pairs = [self.pair(k, p, net) for k, p in enumerate(pairs)]
        for k, point in enumerate(net.capture):
            self.typed(point, str, f"run.capture[{k}]")
            net.capture_point(point)
        if len(set(net.capture)) != len(net.capture):
            raise self.bad("run.capture", "each capture point once")
        if not net.capture and net.pairs:
            net.capture = [net.pairs[0].sender]
        return net

    def run_values(self, net: Network) -> None:
        if not 0 < net.duration_s <= 3600:
            raise self.bad("run.duration_s", "seconds above 0, at most 3600", net.duration_s)
        if not 1 <= net.ping_count <= 10000:
            raise self.bad("run.ping_count", "1 to 10000 pings", net.ping_count)
        if not 0.002 <= net.ping_interval_s <= 60:
            raise self.bad("run.ping_interval_s", "0.002 to 60 seconds", net.ping_interval_s)
        if net.snaplen < 64:
            raise self.bad("run.snaplen", "64 bytes or more (the TCP/IP headers)", net.snaplen)
        if net.format not in ("pcap", "pcapng"):
            raise self.bad("run.format", "pcap or pcapng", net.format)

    def links(self, entries, routers: list[str], hosts: dict[str, str]) -> list[Link]:
        entries = self.typed(entries, list, "link")
        given: dict[frozenset, tuple[int, dict]] = {}
        for k, entry in enumerate(entries):
            where = f"link[{k + 1}]"
            self.typed(entry, dict, where)
            ends = self.typed(entry.get("ends"), list, f"{where}.ends")
            if len(ends) != 2 or ends[0] == ends[1] or \
                    not all(e in routers or e in hosts for e in ends):
                raise self.bad(f"{where}.ends", "two different nodes of the topology", ends)
            for key in entry:
                if key != "ends" and key not in LINK_VALUES:
                    raise self.bad(f"{where}.{key}", f"ends or one of {', '.join(LINK_VALUES)}")
            if all(e in hosts for e in ends):
                raise self.bad(f"{where}.ends", "a router at one end at least (a host hangs "
                               "on one router, [hosts])", ends)
            host = next((e for e in ends if e in hosts), None)
            if host and hosts[host] not in ends:
                raise self.bad(f"{where}.ends", f"{host}'s own router {hosts[host]} at the "
                               "other end (a host has one link, to the router [hosts] names)",
                               ends)
            key = frozenset(ends)
            if key in given:
                raise self.bad(f"{where}.ends", "each link once", ends)
            given[key] = (k, entry)
        out: list[Link] = []
        for host, router in hosts.items():   # host links first: each host's eth0
            k, entry = given.pop(frozenset((host, router)), (None, {"ends": [host, router]}))
            out.append(self.link(len(out) + 1, entry, k, hosts))
        for key, (k, entry) in sorted(given.items(), key=lambda item: item[1][0]):
            out.append(self.link(len(out) + 1, entry, k, hosts))
        if len(out) > MAX_LINKS:
            raise self.bad("link", f"at most {MAX_LINKS} links, host links included")
        net_nodes = [*routers, *hosts]
        reach = {routers[0]}
        todo = [routers[0]]
        while todo:
            node = todo.pop()
            for link in out:
                if node in link.ends:
                    peer = link.ends[1 - link.ends.index(node)]
                    if peer not in reach:
                        reach.add(peer)
                        todo.append(peer)
        missing = [n for n in net_nodes if n not in reach]
        if missing:
            raise self.bad("link", f"links joining every node ({', '.join(missing)} cannot be "
                           f"reached from {routers[0]})")
        return out

    def link(self, number: int, entry: dict, k: int | None, hosts: dict) -> Link:
        where = f"link[{k + 1}]" if k is not None else f"link {entry['ends'][0]}-" \
            f"{entry['ends'][1]}"
        ends = tuple(entry["ends"])
        values: list[dict] = [{}, {}]
        for key in LINK_VALUES:
            value = entry.get(key)
            if value is None:
                continue
            both = value if isinstance(value, list) else [value, value]
            if len(both) != 2:
                raise self.bad(f"{where}.{key}", f"one value, or two: [{ends[0]} to {ends[1]}, "
                               f"{ends[1]} to {ends[0]}]", value)
            for d, v in enumerate(both):
                if isinstance(v, (int, float)) and not isinstance(v, bool) and v == 0:
                    continue
                if not isinstance(v, str):
                    raise self.bad(f"{where}.{key}", f"text such as {EXAMPLES[key]}", v)
                if v.strip() not in ("", "0", "0%"):
                    values[d][key] = v.strip()
        directions = []
        for d in (0, 1):
            sender, receiver = ends[d], ends[1 - d]
            if values[d] and sender in hosts:
                raise self.bad(f"{where}.{'/'.join(values[d])}", f"nothing from host {sender} "
                               f"toward {receiver}: a host's own output is not impaired (a drop "
                               f"there is re-sent locally, never lost on the wire); give it as "
                               f"[{receiver} to {sender}, 0] or on a router's link")
            try:
                imp = Impairment.from_text(**values[d])
            except PcapstatsError as e:
                raise self.bad(f"{where} ({sender} to {receiver})", getattr(e, "what", str(e))
                               ) from None
            directions.append(Direction(sender, receiver, values[d], imp))
        return Link(number, ends, (directions[0], directions[1]))

    def pair(self, k: int, entry, net: Network) -> Pair:
        where = f"pair[{k + 1}]"
        self.typed(entry, dict, where)
        values = {}
        for key, value in entry.items():
            if key not in PAIR_KEYS:
                raise self.bad(f"{where}.{key}", f"one of {', '.join(PAIR_KEYS)}")
            values[key] = self.typed(value, PAIR_KEYS[key], f"{where}.{key}")
        for end in ("from", "to"):
            if values.get(end) not in net.hosts:
                raise self.bad(f"{where}.{end}", f"a host: {', '.join(net.hosts)}",
                               values.get(end))
        if values["from"] == values["to"]:
            raise self.bad(f"{where}.to", "a host other than the sender", values["to"])
        tool = values.get("tool", "iperf3")
        if tool not in TOOLS:
            raise self.bad(f"{where}.tool", f"one of {', '.join(TOOLS)}", tool)
        sizes = values.get("ping_sizes", [56])
        for size in sizes:
            if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= 65507:
                raise self.bad(f"{where}.ping_sizes", "payload sizes of 0 to 65507 bytes",
                               sizes)
        pair = Pair(k, values.pop("from"), values.pop("to"), tool,
                    **{key: tuple(v) if key == "ping_sizes" else v
                       for key, v in values.items() if key != "tool"})
        if not 1 <= pair.repeat <= MAX_REPEAT:
            raise self.bad(f"{where}.repeat", f"1 to {MAX_REPEAT} transfers", pair.repeat)
        if not 0 <= pair.gap_s <= 3600:
            raise self.bad(f"{where}.gap_s", "0 to 3600 seconds between transfers",
                           pair.gap_s)
        if not 0 <= pair.start_s <= 3600:
            raise self.bad(f"{where}.start_s", "0 to 3600 seconds after the first start",
                           pair.start_s)
        try:
            scenario(pair, net).validate()
        except PcapstatsError as e:
            raise self.bad(where, getattr(e, "what", str(e))) from None
        return pair


EXAMPLES = {"rate": "\"30mbit\"", "delay": "\"20ms\"", "jitter": "\"2ms\"", "loss": "\"1%\"",
            "queue": "\"100kb\""}


def scenario(pair: Pair, net: Network):
    """The lab Scenario one pair's tool runs as (its options checked as `lab run` checks
    them; no impairment: the links carry those)."""
    return Scenario(tool=pair.tool, parallel=pair.parallel, cc=pair.cc,
                    duration_s=pair.duration_s or net.duration_s, bytes=pair.bytes,
                    udp_rate=pair.udp_rate, app_rate=pair.app_rate,
                    ping_count=pair.ping_count or net.ping_count,
                    ping_interval_s=pair.ping_interval_s or net.ping_interval_s,
                    ping_sizes=list(pair.ping_sizes), ping_during=pair.ping_during,
                    snaplen=net.snaplen, format=net.format, seed=net.seed + pair.index)
