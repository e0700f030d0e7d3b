"""Topology files read and checked without building anything (issue 28): the shipped seed-000
network's graph, routes and capture points, matrix overrides, and every wrong value said in
one line naming the file, the field and what is expected."""

from __future__ import annotations

import pytest

from pcapstats.errors import UsageError
from pcapstats.lab import matrix, network
from tests.helpers.paths import ROOT

SEED = ROOT / "topologies" / "seed000.toml"

SMALL = """\
routers = ["r1", "r2"]
[hosts]
a = "r1"
b = "r2"
[[link]]
ends = ["r1", "r2"]
rate = "10mbit"
delay = ["5ms", "7ms"]
[[pair]]
from = "a"
to = "b"
"""


def test_the_shipped_seed000_network():
    net = network.load(SEED)
    assert net.routers == ["r1", "r2", "r3", "r4"]
    assert net.hosts == {"h1": "r1", "h2": "r1", "h3": "r1", "h4": "r3", "h5": "r3",
                         "h6": "r3", "h7": "r2", "h8": "r3", "h9": "r4"}
    asked = {link.name: (link.directions[0].asked, link.directions[1].asked)
             for link in net.links if link.directions[0].asked}
    assert asked == {"r1-r2": ({"rate": "40mbit", "delay": "10ms"},) * 2,
                     "r2-r3": ({"rate": "30mbit", "delay": "20ms"},) * 2,
                     "r3-r4": ({"rate": "20mbit", "delay": "10ms"},) * 2}
    assert net.path("h1", "h4") == ["h1", "r1", "r2", "r3", "h4"]
    assert net.path("h1", "h9") == ["h1", "r1", "r2", "r3", "r4", "h9"]
    assert net.path("h7", "h9") == ["h7", "r2", "r3", "r4", "h9"]
    assert net.path("h8", "h9") == ["h8", "r3", "r4", "h9"]
    rates = [d.impairment.rate_bps for d in net.links_on(net.path("h1", "h9"))]
    assert rates == [None, 40e6, 30e6, 20e6, None]


def test_routes_follow_the_graph():
    """Each router reaches every subnet by its shortest path: a packet from any host to any
    other, hop by hop along the routing tables, takes the path the graph gives."""
    net = network.load(SEED)
    routes = net.routes()
    owner = {}
    for link in net.links:
        for node in link.ends:
            owner[link.address(node)] = node
    for src in net.hosts:
        for dst in net.hosts:
            if src == dst:
                continue
            target = net.link_between(dst, net.hosts[dst]).number
            hops, node = [src], src
            while node != dst:
                if node in net.hosts:
                    node = owner[routes[node][0][1]]
                elif target in [l.number for _, l in net.neighbours(node)]:
                    node = dst if dst in [p for p, _ in net.neighbours(node)] else None
                else:
                    via = dict(routes[node])[f"10.77.{target}.0/24"]
                    node = owner[via]
                hops.append(node)
            assert hops == net.path(src, dst), (src, dst)


def test_capture_points_name_an_interface():
    net = network.load(SEED)
    assert net.capture_point("h1") == ("h1", "eth0")
    assert net.capture_point("r2:r3") == ("r2", net.interface_names()[("r2", "r3")])
    assert net.capture_point("r2:eth1") == ("r2", "eth1")
    assert network.capture_label("r2:eth1") == "r2-eth1"
    for point, words in (("r2", "is a router: name its interface"),
                         ("r9:eth0", "names no node"), ("r2:eth9", "has no interface 'eth9'"),
                         ("r1:r4", "r1 has no link to r4")):
        with pytest.raises(UsageError, match=words):
            net.capture_point(point)


def test_per_direction_values_and_overrides(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text(SMALL)
    net = network.load(path)
    link = net.link_between("r1", "r2")
    assert link.toward("r2").impairment.delay_s == pytest.approx(0.005)
    assert link.toward("r1").impairment.delay_s == pytest.approx(0.007)
    net = network.load(path, overrides={"link.r2-r1.rate": "20mbit", "pair.1.cc": "reno",
                                        "run.duration_s": 3})
    assert net.link_between("r1", "r2").toward("r1").impairment.rate_bps == 20e6
    assert net.pairs[0].cc == "reno" and net.duration_s == 3


@pytest.mark.parametrize("change, words", [
    (("", "colour = 1\n"), "colour: one of the keys"),
    (('rate = "10mbit"', 'rate = "fast"'), "link[1] (r1 to r2): bad rate 'fast'"),
    (('rate = "10mbit"', 'rate = 10'), "link[1].rate: expected text such as \"30mbit\""),
    (('rate = "10mbit"', 'rate = ["1mbit", "2mbit", "3mbit"]'), "link[1].rate: expected one "
     "value, or two"),
    (('to = "b"', 'to = "zz"'), "pair[1].to: expected a host: a, b, not 'zz'"),
    (('to = "b"', 'to = "b"\ntool = "nmap"'), "pair[1].tool: expected one of simpleperf"),
    (('to = "b"', 'to = "b"\nparallel = 200'), "pair[1]: parallel 200: out of range, 1 to 128"),
    (('to = "b"', 'to = "b"\nparallel = "2"'), "pair[1].parallel: expected a whole number"),
    (('to = "b"', 'to = "b"\nrepeat = 0'), "pair[1].repeat: expected 1 to 1000"),
    (('b = "r2"', 'b = "r3"'), "hosts.b: expected the router the host hangs on"),
    (('ends = ["r1", "r2"]', 'ends = ["r1", "r1"]'), "link[1].ends: expected two different"),
    (('ends = ["r1", "r2"]\n', 'ends = ["a", "r1"]\n'), "link[1].rate/delay: nothing from host a "
     "toward r1"),
    (('routers = ["r1", "r2"]', 'routers = ["r1", "r2", "r3"]'), "links joining every node "
     "(r3 cannot be reached"),
    (("", "[run]\ncapture = [\"r1\"]\n"), "run.capture: 'r1' is a router"),
    (("", "[run]\nduration_s = -1\n"), "run.duration_s: expected seconds above 0"),
])
def test_a_wrong_value_is_one_line_naming_file_field_and_line(tmp_path, change, words):
    old, new = change
    path = tmp_path / "t.toml"
    path.write_text(SMALL.replace(old, new, 1) if old else new + SMALL if "[run]" not in new
                    else SMALL + new)
    with pytest.raises(UsageError) as info:
        network.load(path)
    text = str(info.value)
    assert words in text and "\n" not in text, text
    assert str(path) in text, text


def test_a_wrong_value_names_its_line(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text(SMALL.replace('to = "b"', 'to = "b"\nrepeat = 0'))
    with pytest.raises(UsageError, match=r"t\.toml, line 12\)"):
        network.load(path)


def test_a_matrix_over_a_topology_files_values(tmp_path):
    (tmp_path / "t.toml").write_text(SMALL)
    spec = tmp_path / "spec.toml"
    spec.write_text('[base]\ntopology = "t.toml"\n[axes]\n"link.r1-r2.rate" = ["5mbit", '
                    '"10mbit"]\n"pair.1.tool" = ["iperf3", "simpleperf"]\n')
    cells = matrix.load_spec(spec)
    assert len(cells) == 4 and all(c.scenario is None for c in cells)
    rates = [c.network.link_between("r1", "r2").toward("r2").impairment.rate_bps
             for c in cells]
    assert rates == [5e6, 5e6, 10e6, 10e6]
    assert [c.network.pairs[0].tool for c in cells] == ["iperf3", "simpleperf"] * 2
    spec.write_text('[base]\ntopology = "t.toml"\n[axes]\n"link.r1-r9.rate" = ["5mbit"]\n')
    with pytest.raises(UsageError, match=r"axes\.link\.r1-r9\.rate: a link of the topology"):
        matrix.load_spec(spec)
    spec.write_text('[base]\ntopology = "t.toml"\n[axes]\n"pair.1.parallel" = ["two"]\n')
    with pytest.raises(UsageError, match=r"pair\[1\]\.parallel: expected a whole number"):
        matrix.load_spec(spec)


def test_lab_run_refuses_options_beside_a_topology_file(tmp_path):
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", "pcapstats", "lab", "run", "--topology",
                           str(SEED), "--rate", "10mbit", "-P", "2", "-o",
                           str(tmp_path / "x.pcap")], capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"pcapstats: error: --rate, --parallel cannot go with --topology: the file sets the "
        f"run ({SEED}). Set it in the file ([run], [[link]], [[pair]])"]
    assert list(tmp_path.iterdir()) == []
