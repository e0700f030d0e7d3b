"""Ready-made lab topologies: two hosts, sender - router - receiver, a chain of K routers, and a
dumbbell of N pairs sharing one link.

The last three describe their shared link as ``lab.bottleneck`` (a
:class:`~pcapstats.lab.netns.Bottleneck`; a chain lists one per router in ``lab.bottlenecks``):
where :mod:`pcapstats.lab.impair` puts rate, loss and delay.  ``lab.pairs`` names the (sender,
receiver) host pairs.  Each is closed again if building it fails.

    with sender_router_receiver() as lab:
        lab.run("sender", "ping", "-c", "3", lab.address("receiver"))
"""

from __future__ import annotations

from typing import Callable

from pcapstats.lab.commands import LabError
from pcapstats.lab.netns import Bottleneck, Lab

MAX_PAIRS = 100
MAX_ROUTERS = 8


def _built(run_prefix: str | None, build: Callable[[Lab], None]) -> Lab:
    """A new lab that ``build`` fills, ready for traffic; closed again if building fails."""
    lab = Lab(run_prefix)
    try:
        build(lab)
        lab.wait_ready()
    except BaseException:
        lab.close()
        raise
    return lab


def two_hosts(run_prefix: str | None = None) -> Lab:
    """Hosts ``a`` (10.77.0.1, fd00:77::1) and ``b`` (10.77.0.2, fd00:77::2), one link."""
    def build(lab: Lab) -> None:
        lab.add_host("a")
        lab.add_host("b")
        lab.link("a", "b", ipv4=("10.77.0.1/24", "10.77.0.2/24"),
                 ipv6=("fd00:77::1/64", "fd00:77::2/64"))
        lab.pairs = [("a", "b")]
    return _built(run_prefix, build)


def sender_router_receiver(run_prefix: str | None = None) -> Lab:
    """``sender`` (10.77.1.1) - ``router`` (.254 on both nets) - ``receiver`` (10.77.2.1).

    IPv6 alike: fd00:77:1::1 - fd00:77:1::fe | fd00:77:2::fe - fd00:77:2::1.  The router
    forwards; the end hosts route everything through it.  Put impairments on the router's
    egress so the capture shows real in-network loss (see DESIGN.md).
    """
    def build(lab: Lab) -> None:
        for host in ("sender", "router", "receiver"):
            lab.add_host(host)
        # Before the links: switching IPv6 forwarding on later restarts the interfaces'
        # IPv6 setup, and the router then ignores neighbour solicitations for a second.
        lab.enable_forwarding("router")
        lab.link("sender", "router", ipv4=("10.77.1.1/24", "10.77.1.254/24"),
                 ipv6=("fd00:77:1::1/64", "fd00:77:1::fe/64"))
        lab.link("router", "receiver", ipv4=("10.77.2.254/24", "10.77.2.1/24"),
                 ipv6=("fd00:77:2::fe/64", "fd00:77:2::1/64"))
        for host, net in (("sender", 1), ("receiver", 2)):
            lab.route(host, "default", f"10.77.{net}.254")
            lab.route(host, "default", f"fd00:77:{net}::fe")
        lab._bottleneck = Bottleneck("router", egress="eth1", ingress="eth0")
        lab.pairs = [("sender", "receiver")]
    return _built(run_prefix, build)


def chain(routers: int = 2, run_prefix: str | None = None) -> Lab:
    """``sender`` - ``router1`` - ... - ``routerK`` - ``receiver``: a path of K routers.

    Link i (1..K+1, counted from the sender) is 10.77.i.0/24 and fd00:77:i::/64; its
    sender-side end is .1 (::1), its receiver-side end .2 (::2)::

        sender 10.77.1.1 ─ 10.77.1.2 router1 10.77.2.1 ─ 10.77.2.2 router2 10.77.3.1 ─
        10.77.3.2 receiver                                   (K = 2)

    Every router forwards and knows every subnet (static routes toward its neighbours).
    ``lab.bottlenecks`` lists each router's link toward the receiver (``eth1``, ingress
    ``eth0``): apply a different impairment on each for per-link rate and delay.
    ``lab.bottleneck`` is router1's.
    """
    if not 1 <= routers <= MAX_ROUTERS:
        raise LabError(f"a chain needs 1 to {MAX_ROUTERS} routers, not {routers}")
    nodes = ["sender", *(f"router{k}" for k in range(1, routers + 1)), "receiver"]
    def build(lab: Lab) -> None:
        for node in nodes:
            lab.add_host(node)
            if node.startswith("router"):
                lab.enable_forwarding(node)  # before the links: see sender_router_receiver
        for i, (left, right) in enumerate(zip(nodes, nodes[1:]), start=1):
            lab.link(left, right, ipv4=(f"10.77.{i}.1/24", f"10.77.{i}.2/24"),
                     ipv6=(f"fd00:77:{i:x}::1/64", f"fd00:77:{i:x}::2/64"))
        links = len(nodes) - 1
        lab.route("sender", "default", "10.77.1.2")
        lab.route("sender", "default", "fd00:77:1::2")
        lab.route("receiver", "default", f"10.77.{links}.1")
        lab.route("receiver", "default", f"fd00:77:{links:x}::1")
        for k in range(1, routers + 1):  # router k sits between links k and k + 1
            for j in range(1, links + 1):
                if j in (k, k + 1):
                    continue
                hop = (k, 1) if j < k else (k + 1, 2)  # (link, end) of the next hop
                lab.route(f"router{k}", f"10.77.{j}.0/24", f"10.77.{hop[0]}.{hop[1]}")
                lab.route(f"router{k}", f"fd00:77:{j:x}::/64",
                          f"fd00:77:{hop[0]:x}::{hop[1]}")
        lab._bottlenecks = [Bottleneck(f"router{k}", egress="eth1", ingress="eth0")
                            for k in range(1, routers + 1)]
        lab._bottleneck = lab._bottlenecks[0]
        lab.pairs = [("sender", "receiver")]
    return _built(run_prefix, build)


def dumbbell(pairs: int = 2, run_prefix: str | None = None) -> Lab:
    """``sender1..N`` and ``receiver1..N`` sharing one bottleneck: the router's ``br1``.

    One router, two LANs, each a bridge inside the router's namespace::

        sender_i  10.77.1.i  fd00:77:1::i ─┐                    ┌─ receiver_i 10.77.2.i
                                router br0 10.77.1.254 | br1 10.77.2.254   fd00:77:2::i
                                           fd00:77:1::fe | fd00:77:2::fe

    (i in decimal for IPv4, in hex for IPv6: receiver10 is fd00:77:2::a.)  Every sender's
    traffic to any receiver is routed out of ``br1``: that one device's qdisc and one
    ``FORWARD -o br1`` rule see every flow, so the pairs share a single rate, queue, loss and
    delay, and a capture on ``router`` ``br1`` is the bottleneck wire.  ``dumbbell(1)`` is
    ``sender_router_receiver()`` with a bridge on each side and the hosts numbered.

    Why one router with bridges rather than two routers joined by the bottleneck: the path
    has the same single forwarding hop and the same addresses as sender_router_receiver
    (impairments, sidecars and tests treat both alike), and fewer veth crossings, which
    cost CPU on a small shared machine.  Each sender/receiver link is its own veth, a port
    of its LAN's bridge, so a capture on ``lab.interface("router", "receiver2")`` or on a
    host's ``eth0`` shows that host's flows alone.
    """
    if not 1 <= pairs <= MAX_PAIRS:
        raise LabError(f"dumbbell needs 1 to {MAX_PAIRS} pairs, not {pairs}")
    def build(lab: Lab) -> None:
        lab.add_host("router")
        lab.enable_forwarding("router")  # before the links: see sender_router_receiver
        for side, net in (("sender", 1), ("receiver", 2)):
            ports = []
            for i in range(1, pairs + 1):
                host = f"{side}{i}"
                lab.add_host(host)
                end, port = lab.link(host, "router", ipv4=(f"10.77.{net}.{i}/24", None),
                                     ipv6=(f"fd00:77:{net}::{i:x}/64", None))
                ports.append(port.name)
                lab.route(host, "default", f"10.77.{net}.254")
                lab.route(host, "default", f"fd00:77:{net}::fe")
            lab.bridge("router", f"br{net - 1}", ports, ipv4=f"10.77.{net}.254/24",
                       ipv6=f"fd00:77:{net}::fe/64")
        lab._bottleneck = Bottleneck("router", egress="br1", ingress="br0")
        lab.pairs = [(f"sender{i}", f"receiver{i}") for i in range(1, pairs + 1)]
    return _built(run_prefix, build)


def network(net, run_prefix: str | None = None) -> Lab:
    """The lab of a topology file (:class:`pcapstats.lab.network.Network`): its routers and
    hosts, a veth pair a link (10.77.<link>.0/24, ends .1 and .2, IPv4 only), the routes of
    the graph's shortest paths.  ``lab.pairs`` are the file's pairs; there is no single
    bottleneck: each impaired link direction is applied on its own (see network_run)."""
    def build(lab: Lab) -> None:
        for router in net.routers:
            lab.add_host(router)
            lab.enable_forwarding(router)  # before the links: see sender_router_receiver
        for host in net.hosts:
            lab.add_host(host)
        for link in net.links:
            a, b = link.ends
            lab.link(a, b, ipv4=(f"{link.address(a)}/24", f"{link.address(b)}/24"))
        for node, routes in net.routes().items():
            for prefix, via in routes:
                lab.route(node, prefix, via)
        lab.pairs = [(p.sender, p.receiver) for p in net.pairs]
    return _built(run_prefix, build)
