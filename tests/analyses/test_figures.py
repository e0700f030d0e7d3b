"""What every figure says about itself: its title names the capture(s) it shows, and no text
is clipped by the figure's edge or drawn over other text -- at 1, 4 and 12 captures, overlaid
and side by side, and for every per-stream figure of every shipped capture."""
import itertools

import pytest
from tests.helpers.paths import CAPTURES, DATA

import pcapstats as ps
from pcapstats.naming import capture_names as short_names

SHIPPED = sorted(p for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))
TCP_RUNS = sorted(CAPTURES.glob("sp-*.pcap"))          # simpleperf runs: one or more TCP flows


def _texts(fig):
    """(text, window extent) of every visible, non-empty text of the drawn figure."""
    from matplotlib.axis import Tick
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    ticks_drawn = {id(label) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
                   for tick in axis._update_ticks() for label in (tick.label1, tick.label2)}
    tick_labels = {id(label) for tick in fig.findobj(Tick) for label in (tick.label1, tick.label2)}
    found = []
    for artist in fig.findobj(lambda a: hasattr(a, "get_text") and hasattr(a, "get_window_extent")):
        if id(artist) in tick_labels and id(artist) not in ticks_drawn:
            continue           # a tick outside the axis' limits: matplotlib does not draw it
        if artist.get_visible() and artist.get_text().strip() and artist.figure is fig:
            found.append((artist, artist.get_window_extent(renderer)))
    return found


def _titles(fig) -> str:
    parts = [fig._suptitle.get_text()] if fig._suptitle else []
    parts += [ax.get_title() for ax in fig.axes]
    return "\n".join(parts)


def assert_readable(fig, names):
    """Every capture named in the title; every text inside the figure; titles, axis labels,
    notes and legends not over each other."""
    title = " ".join(_titles(fig).split())
    for name in names:
        assert name in title, f"title {title!r} does not name {name}"
    edge = fig.bbox
    texts = _texts(fig)
    for artist, box in texts:
        assert (box.x0 >= edge.x0 - 1 and box.x1 <= edge.x1 + 1 and box.y0 >= edge.y0 - 1
                and box.y1 <= edge.y1 + 1), f"text {artist.get_text()!r} clipped: {box} vs {edge}"
    labels = [(a, b) for a, b in texts if a in _framing(fig)]
    for (a, box_a), (b, box_b) in itertools.combinations(labels, 2):
        assert not box_a.overlaps(box_b), f"{a.get_text()!r} over {b.get_text()!r}"


def _framing(fig):
    """The figure's own words: titles, axis labels, the note, the legends' texts."""
    out = [t for t in (fig._suptitle, fig._supxlabel) if t is not None]
    for ax in fig.axes:
        out += [ax.title, ax.xaxis.label, ax.yaxis.label]
    for lg in fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]:
        out += list(lg.get_texts())
    return out


@pytest.mark.parametrize("n", [1, 4, 12])
@pytest.mark.parametrize("layout", ["overlay", "side"])
def test_iograph_of_several_captures(n, layout):
    paths = TCP_RUNS[:n]
    assert len(paths) == n
    result = ps.iograph(paths, interval=0.5)
    fig = result.figure(layout=layout)
    names = short_names(paths) if n <= 3 else []
    assert_readable(fig, names)
    if n > 3:      # many captures: the title says how many, each panel or line names its own
        assert f"{n} captures" in _titles(fig)
        shown = _titles(fig) + " ".join(t.get_text() for t, _ in _texts(fig))
        for name in short_names(paths):
            assert name.rsplit(".", 1)[0] in shown, f"{name} named nowhere in the figure"


def test_iograph_by_stream_names_the_endpoints():
    path = CAPTURES / "sp-3pairs-reno+cubic+bbr.pcap"
    fig = ps.iograph(path, by="stream").figure()
    assert_readable(fig, [path.name])
    legend = " ".join(t.get_text() for lg in fig.legends + [a.get_legend() for a in fig.axes]
                      if lg for t in lg.get_texts())
    assert "10.77.1.1" in legend and "8088" in legend, legend


@pytest.mark.parametrize("path", TCP_RUNS, ids=lambda p: p.name)
@pytest.mark.parametrize("analysis", ["cwnd", "seqgraph", "rtt"])
def test_per_stream_figures_name_their_capture(analysis, path):
    result = getattr(ps, analysis)(path)
    assert_readable(result.figure(), [path.name])


@pytest.mark.parametrize("path", [CAPTURES / "sp-cubic-loss1pct.pcap",
                                  CAPTURES / "sp-3pairs-reno+cubic+bbr.pcap"],
                         ids=lambda p: p.name)
def test_flavour_figures_name_their_capture(path):
    result = ps.flavour(path)
    for stream in result.parts[0].details:
        assert_readable(result.figure(stream=stream), [path.name])


@pytest.mark.parametrize("path", [CAPTURES / "tcp_2streams.pcap", CAPTURES / "sp-reno-loss10pct.pcap"],
                         ids=lambda p: p.name)
def test_window_scaling_figure_names_its_capture(path):
    assert_readable(ps.cwnd(path).figure(graph="wscale"), [path.name])


@pytest.mark.parametrize("paths", [[CAPTURES / "ping-sweep.pcap"],
                                   [CAPTURES / "ping-sweep.pcap", CAPTURES / "udp_ping.pcapng"]],
                         ids=["one", "two"])
def test_ping_figure_names_its_captures(paths):
    assert_readable(ps.ping(paths).figure(), short_names(paths))


@pytest.mark.parametrize("path", [CAPTURES / "sp-3pairs-reno+cubic+bbr.pcap",
                                  CAPTURES / "sp-2pairs-reno+cubic.pcap"], ids=lambda p: p.name)
def test_fairness_figure_names_its_capture(path):
    assert_readable(ps.fairness(path).figure(), [path.name])


def test_delay_figure_names_its_capture():
    path = CAPTURES / "ping-sweep-sender.pcap"
    assert_readable(ps.delay(path).figure(), [path.name])


@pytest.mark.parametrize("by", [None, "cc,loss"], ids=["captures", "by-cc-loss"])
def test_comparison_figure_names_its_captures(by):
    paths = sorted(CAPTURES.glob("sp-*loss*.pcap"))
    result = ps.compare(paths, by=by)
    fig = result.figure()
    assert_readable(fig, [])
    assert f"{len(paths)} captures" in _titles(fig)
    legend = " ".join(t.get_text() for lg in fig.legends for t in lg.get_texts())
    assert "95 % CI" in legend if by else "one capture" in legend


@pytest.mark.parametrize("by", [None, "loss"], ids=["a-panel-a-capture", "a-panel-a-group"])
def test_comparison_iographs_name_every_capture(by):
    paths = sorted(CAPTURES.glob("sp-reno-loss*.pcap")) + [CAPTURES / "udp_ping.pcapng"]
    fig = ps.compare(paths, by=by).figure(kind="iographs")
    assert_readable(fig, [])
    shown = _titles(fig) + " ".join(t.get_text() for t, _ in _texts(fig))
    for name in short_names(paths):
        assert name.rsplit(".", 1)[0] in shown, f"{name} named nowhere in the figure"
    legend = " ".join(t.get_text() for lg in fig.legends for t in lg.get_texts())
    assert "average over the capture span" in legend and "peak interval" in legend


def test_comparison_of_one_capture_draws_too():
    path = CAPTURES / "tcp_2streams.pcap"
    assert_readable(ps.compare(path).figure(), [])
    assert_readable(ps.compare([path]).figure(kind="iographs"), [path.name])


def test_comparison_signal_panel_shows_every_wifi_capture():
    """dBm is below 0: the signal panel's axis spans the values, not 0 and up."""
    paths = [DATA / n for n in ("ieee802.11_exthdr.pcap", "ieee802.11_meshid.pcap",
                                "wpa2linkuppassphraseiswireshark.pcap")]
    result = ps.compare(paths)
    fig = result.figure()
    assert_readable(fig, [])
    (ax,) = [a for a in fig.axes if a.get_title().startswith("Signal strength")]
    low, high = ax.get_ylim()
    signals = result.table("captures")["signal_dbm"]
    assert low < signals.min() and signals.max() < high < 0
    assert ax.get_ylabel() == "dBm"
