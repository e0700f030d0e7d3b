"""What every figure says about itself: its title names the capture(s) it shows, its axes carry
units, its legends say which line is which and sit outside the data, and no text is clipped by
the figure's edge or drawn over other text -- at 1, 4 and 12 captures, overlaid and side by
side, for every per-stream figure of every shipped capture, at the receiver as at the sender.

And what each figure must not make a reader believe (issue 25): an RTT axis holds round trips
only (checked against the lab's own ping of the path), a cwnd axis fits the cwnd (checked
against the sender kernel's snd_cwnd), a comparison's intervals stay within what the quantity
can take and say their n, an unknown flavour is no confidence of 0, the I/O graph's last
interval is marked partial where the capture ended inside it."""
import itertools
import json
import re

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from tests.helpers.paths import CAPTURES, DATA

import pcapstats as ps
from pcapstats import plots
from pcapstats.analyses import load_all
from pcapstats.cli import main
from pcapstats.naming import capture_names as short_names
from pcapstats.results import RESULT_TYPES

SHIPPED = sorted(p for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))
TCP_RUNS = sorted(CAPTURES.glob("sp-*.pcap"))          # simpleperf runs: one or more TCP flows
RECEIVER_SIDE = [CAPTURES / n for n in ("tcp_2streams.pcap", "iperf3-4flows.pcap",
                                        "sp-2pairs-reno+cubic.pcap")]   # TCP captured there
UNITS = re.compile(r"\((k|M|G|T)?(bit/s|B|B/s|bytes|packets/s|ms|s|%|dBm)\)$")
UNITLESS = {"Jain's index", "%", "ms", "segments", "dBm"}     # a unit alone, or no unit at all

load_all()


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
    notes and legends not over each other; legends off the data; numeric axes in units."""
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
    assert_legends_outside(fig)
    assert_units(fig)


def _legends(fig):
    return fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]


def legend_text(fig) -> str:
    """Every legend's entries, one line each (wrapped labels joined)."""
    return "\n".join(" ".join(t.get_text().split()) for lg in _legends(fig)
                     for t in lg.get_texts())


def assert_legends_outside(fig):
    """No legend over any Axes' data area, and every labelled line, bar or dot set of a panel
    named in a legend."""
    renderer = fig.canvas.get_renderer()
    areas = [ax.get_window_extent(renderer) for ax in fig.axes]
    for lg in _legends(fig):
        box = lg.get_window_extent(renderer)
        for area in areas:
            inside = min(box.x1, area.x1) - max(box.x0, area.x0) > 1 and \
                min(box.y1, area.y1) - max(box.y0, area.y0) > 1
            assert not inside, f"legend {[t.get_text() for t in lg.get_texts()]} on the data"
    said = legend_text(fig)
    for ax in fig.axes:
        for label in ax.get_legend_handles_labels()[1]:
            assert " ".join(label.split()) in said, f"{label!r} is in no legend"


def _categories(axis) -> bool:
    """The axis' ticks are names (captures, labels, streams), not numbers."""
    texts = [t.get_text() for t in axis.get_ticklabels() if t.get_text()]
    return any(not re.fullmatch(r"[−-]?[\d.,]+(e[+-]?\d+)?%?", t) for t in texts)


def assert_units(fig):
    """Every labelled numeric axis says its unit ("Time since ... (s)", "Window (kB)")."""
    for ax in fig.axes:
        for axis, label in ((ax.xaxis, ax.get_xlabel()), (ax.yaxis, ax.get_ylabel())):
            label = label.split("\n")[0].strip()
            if not label or _categories(axis):
                continue               # unlabelled (a shared axis) or categories (names)
            assert UNITS.search(label) or label in UNITLESS, f"axis {label!r} has no unit"


def _framing(fig):
    """The figure's own words: titles, axis labels, the note, the legends' texts."""
    out = [t for t in (fig._suptitle, fig._supxlabel) if t is not None]
    out += fig.findobj(lambda a: getattr(a, "get_gid", None) and a.get_gid() == "note")
    for ax in fig.axes:
        out += [ax.title, ax.xaxis.label, ax.yaxis.label]
    for lg in fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]:
        out += list(lg.get_texts())
    return out


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("path", TCP_RUNS, ids=lambda p: p.name)
@pytest.mark.parametrize("analysis", ["cwnd", "seqgraph", "rtt", "limits"])
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


@pytest.mark.parametrize("path", [CAPTURES / "tcp_2streams.pcap",
                                  CAPTURES / "sp-reno-loss10pct.pcap"], ids=lambda p: p.name)
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


@pytest.mark.slow
@pytest.mark.parametrize("name", ["wpa2linkuppassphraseiswireshark.pcap",
                                  "ieee802.11_exthdr.pcap", "Network_Join_Nokia_Mobile.pcap"])
def test_wifi_figure_names_its_capture(name):
    """The four panels on one time axis, each in its unit; a capture of link type 105 (no
    radiotap: no signal, no rate) says so under its signal panel."""
    fig = ps.wifi(DATA / name).figure()
    assert_readable(fig, [name])
    assert len(fig.axes) == 4


@pytest.mark.filterwarnings("ignore::pcapstats.SkippedPacketsWarning")     # 802.11 frames
@pytest.mark.parametrize("path", [CAPTURES / "udp_ping.pcapng", DATA / "wpa-Induction.pcap",
                                  DATA / "dns_isp_hijack.pcapng"], ids=lambda p: p.name)
def test_hierarchy_figure_names_its_capture_and_draws_the_shares(path):
    """A row a protocol (the root left out), its bars the table's shares of the bytes and of
    the packets, its name indented by its depth."""
    result = ps.hierarchy(path)
    fig = result.figure()
    assert_readable(fig, [path.name])
    table = result.table()
    widths = sorted(round(p.get_width(), 6) for p in fig.axes[0].patches)
    want = sorted(round(100 * v, 6) for v in (*table["packets_share"][1:],
                                              *table["bytes_share"][1:]))
    assert widths == want
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["  " * (d - 1) + p
                      for d, p in zip(table["depth"][1:], table["protocol"][1:])]


@pytest.mark.parametrize("name", ["sp-2pairs-reno+cubic.pcap", "udp_ping.pcapng"])
def test_hierarchy_figure_counts_read_back_as_the_tables(name):
    """Each bar's words ("7966 kB, 7948 packets") are its row's bytes to the digits shown and
    its packets exactly; no exponent (a 7.97 MB row once read "7.97e+03 kB")."""
    table = ps.hierarchy(CAPTURES / name).table()
    fig = ps.hierarchy(CAPTURES / name).figure()
    words = [t.get_text() for t in fig.axes[0].texts if "packet" in t.get_text()]
    assert len(words) == len(table["path"]) - 1
    scale = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}
    for text, size, packets in zip(words, table["bytes"][1:], table["packets"][1:]):
        words_read = re.fullmatch(r"([\d.]+) (B|kB|MB|GB), (\d+) packets?", text)
        assert words_read, text
        value, unit, n = words_read.groups()
        decimals = len(value.partition(".")[2])          # half its last digit: the rounding
        assert int(n) == packets, text
        assert abs(float(value) * scale[unit] - size) <= 0.5 * 10.0 ** -decimals * scale[unit]


def test_delay_figure_names_its_capture():
    path = CAPTURES / "ping-sweep-sender.pcap"
    assert_readable(ps.delay(path).figure(), [path.name])


@pytest.mark.slow
@pytest.mark.parametrize("by", [None, "cc,loss"], ids=["captures", "by-cc-loss"])
def test_comparison_figure_names_its_captures(by):
    paths = sorted(CAPTURES.glob("sp-*loss*.pcap"))
    result = ps.compare(paths, by=by)
    fig = result.figure()
    assert_readable(fig, [])
    assert f"{len(paths)} captures" in _titles(fig)
    legend = " ".join(t.get_text() for lg in fig.legends for t in lg.get_texts())
    assert "95 % CI" in legend if by else "one capture" in legend


@pytest.mark.slow
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


@pytest.mark.slow
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


# -- figures that cannot mislead -------------------------------------------------------------

def _sidecar(path):
    return json.loads(path.with_suffix(".json").read_text())


def _points(ax):
    """The y values of every line of data points drawn on ``ax`` (markers, not rules)."""
    out = [np.asarray(line.get_ydata(), float) for line in ax.get_lines()
           if line.get_marker() not in (None, "None", "", " ") and len(line.get_ydata())
           and line.get_transform() == ax.transData]
    return np.concatenate(out) if out else np.zeros(0)


@pytest.mark.parametrize("path", [CAPTURES / "sp-reno-loss10pct.pcap",
                                  CAPTURES / "sp-cubic-loss1pct.pcap", *RECEIVER_SIDE],
                         ids=lambda p: p.name)
def test_rtt_axis_holds_round_trips_only(path):
    """Every point on the RTT axis is a round trip: none shorter than the path's propagation
    as the lab's own ping measured it (the receiver's ACK delay and the sender's turnaround,
    microseconds, are not drawn), and the base and median lines are the path table's."""
    result = ps.rtt(path)
    fig = result.figure()
    assert_readable(fig, [path.name])
    ax = fig.axes[0]
    ping_ms = min(_sidecar(path)["rtt"]["samples_ms"])
    points = _points(ax)
    assert len(points) > 20
    assert points.min() > 0.9 * ping_ms, (points.min(), ping_ms)
    path_row = result.to_pandas("path").iloc[0]
    said = legend_text(fig)
    assert "path RTT" in said
    assert f"base RTT (min): {path_row['rtt_min_ms']:.3g} ms" in said
    assert f"RTT under load (median): {path_row['rtt_median_ms']:.3g} ms" in said
    assert abs(path_row["rtt_min_ms"] - ping_ms) < 0.1 * ping_ms
    assert ax.get_ylabel() == "RTT (ms)"


@pytest.mark.parametrize("path", RECEIVER_SIDE + [CAPTURES / "sp-reno-loss1pct.pcap"],
                         ids=lambda p: p.name)
def test_cwnd_axis_fits_the_cwnd(path):
    """At the receiver Wireshark's bytes in flight is near 0 while the cwnd is tens of kB: the
    window axis reaches the sender kernel's median cwnd (its TCP_INFO snd_cwnd x MSS over the
    transfer) and every point of the estimate the figure draws."""
    result = ps.cwnd(path)
    fig = result.figure()
    assert_readable(fig, [path.name])
    top = fig.axes[0].get_ylim()[1]
    drawn = result.table("samples")["cwnd_bytes"]
    assert top >= np.nanmax(drawn), (top, np.nanmax(drawn))
    flows = [f for f in _sidecar(path)["flows"] if f.get("streams", {}).get(path.name) ==
             result.stream and "tcp_info" in f]          # iperf3's flows have none
    for info in (f["tcp_info"] for f in flows):
        sending = np.asarray(info["data_segs_out"]) > 10
        kernel = np.median(np.asarray(info["snd_cwnd"])[sending]
                           * np.asarray(info["snd_mss"])[sending])
        assert top >= kernel, (top, kernel)
    assert flows or path.name.startswith("iperf3")
    if result.side == "receiver":
        assert any("Captured at the receiver" in n for n in plots.notes(fig))


def _bars(ax):
    """(x, low, high) of every error bar drawn on ``ax``."""
    out = []
    for container in ax.containers:
        if not hasattr(container, "lines") or container.lines[2] == ():
            continue
        for segment in container.lines[2][0].get_segments():
            (x, low), (_, high) = segment
            out.append((x, low, high))
    return out


@pytest.mark.slow
def test_comparison_of_two_trials_says_n_and_draws_no_interval_past_what_can_be():
    """Two trials a group: t(0.975, 1) = 12.7 makes the goodput interval +-50 Mbit/s around
    5 Mbit/s on a 10 Mbit/s link.  No bar leaves what the quantity can take (rates from 0,
    shares 0..1), every panel says n = 2, the rate axes stay near the link's rate (the
    sidecars' asked bottleneck), and the panels say which intervals are too wide to draw."""
    paths = [*sorted(CAPTURES.glob("sp-*-loss0pct.pcap")),
             *sorted(CAPTURES.glob("sp-*-loss30pct.pcap"))]
    result = ps.compare(paths, by="cc")
    assert (result.table("groups")["n"] == 2).all()
    fig = result.figure()
    assert_readable(fig, [])
    rate = max(_sidecar(p)["measured"]["rate_asked_bps"] for p in paths)
    titles = {ax.get_title().split("\n")[0]: ax for ax in fig.axes}
    for name, ax in titles.items():
        assert re.search(r"\bn = [12]( to 2)? a group", ax.get_title()), ax.get_title()
        low, high = (1.0, 0.0) if "%" in ax.yaxis.get_major_formatter()(0.5, 0) else (0, None)
        for _, bottom, top in _bars(ax):
            assert bottom >= 0 and (high is None or top <= 1.0), (name, bottom, top)
    goodput = titles["Goodput"]
    assert goodput.get_ylim()[1] < 1.3 * rate, goodput.get_ylim()
    assert "too wide to mean much" in goodput.get_title() and "t = 12.7" in goodput.get_title()
    assert _bars(goodput) == []
    assert "too wide to mean much" in legend_text(fig)


@pytest.mark.slow
def test_unknown_flavour_is_no_confidence_of_zero():
    """The 30 % loss runs' flavour is unknown: the confidence panel shows no point for them
    (at 0 or anywhere) and says "unknown" where they are."""
    paths = sorted(CAPTURES.glob("sp-*loss*.pcap"))
    result = ps.compare(paths, by="cc,loss")
    captures = result.table("captures")
    unknown = captures["flavour"] == "unknown"
    assert unknown.sum() >= 1
    fig = result.figure()
    assert_readable(fig, [])
    (ax,) = [a for a in fig.axes if a.get_title().startswith("Flavour confidence")]
    points = _points(ax)
    points = points[~np.isnan(points)]
    assert (result.table("groups")["n"] == 1).all()
    assert len(points) == 2 * (~unknown).sum()    # a dot a capture, its group's mean (n = 1)
    assert (points > 0.3).all(), points
    words = [t.get_text() for t in ax.texts if "unknown" in t.get_text()]
    assert sum(int(w.split()[0]) if w[0].isdigit() else 1 for w in words) == unknown.sum()
    assert f"flavour unknown in {unknown.sum()}" in ax.get_title()


@pytest.mark.parametrize("by", [None, "stream"])
def test_iograph_marks_a_partial_last_interval(by):
    """tcp_2streams.pcap lasts 1.14 s: its second 1 s interval holds 0.14 s of packets.  That
    interval is dotted and the time after the capture's last packet shaded, and the legend
    says why; the full intervals are solid."""
    path = CAPTURES / "tcp_2streams.pcap"
    result = ps.iograph(path, by=by)
    span = float(result.table("summary")["capture_span_s"][0])
    assert 1.0 < span < 2.0
    fig = result.figure()
    assert_readable(fig, [path.name])
    ax = fig.axes[0]
    dotted = [p for p in ax.patches if getattr(p, "get_linestyle", lambda: "")() == ":"]
    assert dotted and all(np.allclose(p.get_path().vertices[:, 0].min(), 1.0) for p in dotted)
    shade = [p for p in ax.patches if p.get_hatch() == "//"]
    assert len(shade) == 1
    assert np.allclose([shade[0].get_x(), shade[0].get_x() + shade[0].get_width()], [span, 2.0])
    assert "only partly captured" in legend_text(fig)


def test_iograph_marks_partial_only_the_intervals_the_capture_ended_in():
    """sp-3pairs ends at 3.80 s: streams 0 (last packet 3.80 s) and 1 (3.56 s) end in the
    interval 3.5-4.0 s, which the capture ended inside: dotted; stream 2's last packet is at
    3.44 s, so its last interval, 3.0-3.5 s, was captured whole: solid."""
    result = ps.iograph(CAPTURES / "sp-3pairs-reno+cubic+bbr.pcap", by="stream", interval=0.5)
    summary = result.to_pandas("summary")
    ended_inside = (summary["last_s"] // 0.5 == summary["capture_span_s"] // 0.5).tolist()
    assert ended_inside == [True, True, False]
    fig = result.figure()
    assert_readable(fig, [])
    dotted = [p for p in fig.axes[0].patches if getattr(p, "get_linestyle", lambda: "")() == ":"]
    colours = {tuple(np.round(p.get_edgecolor(), 3)) for p in dotted}
    lines = {label.split()[1]: tuple(np.round(h.get_edgecolor(), 3)) for h, label in
             zip(*fig.axes[0].get_legend_handles_labels()) if label.startswith("tcp")}
    assert colours == {lines[str(s)] for s, inside in zip(summary["stream"], ended_inside)
                       if inside}


# -- draws into a given Axes, as pandas' plot(ax=) ------------------------------------------

FIGURE_INPUTS = {"ping": CAPTURES / "ping-sweep.pcap",
                 "delay": CAPTURES / "ping-sweep-sender.pcap",
                 "fairness": CAPTURES / "sp-3pairs-reno+cubic+bbr.pcap",
                 "compare": CAPTURES / "sp-reno-loss1pct.pcap",
                 "wifi": DATA / "ieee802.11_exthdr.pcap"}
PANELS = {"fairness": 3, "wifi": 4}


def _axes(n):
    fig = Figure(figsize=(6 * n, 4), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, n, squeeze=False)[0]
    return fig, list(axes) if n > 1 else axes[0]


@pytest.mark.parametrize("name", sorted(n for n, t in RESULT_TYPES.items() if t.draws))
def test_every_figure_draws_into_a_given_axes(name):
    path = FIGURE_INPUTS.get(name, CAPTURES / "sp-reno-loss1pct.pcap")
    result = getattr(ps, name)(path)
    options = {"metrics": "goodput"} if name == "compare" else {}
    fig, ax = _axes(PANELS.get(name, 1))
    assert result.figure(ax=ax, **options) is ax
    for one in ax if isinstance(ax, list) else [ax]:
        assert one.lines or one.collections or one.patches, f"{name} drew nothing"
        assert path.name in one.get_title() or path.stem in one.get_title(), one.get_title()
    assert fig.legends == []              # nothing put on the caller's figure itself
    assert_readable(fig, [])
    with pytest.raises(ps.UsageError, match="panel|matplotlib Axes"):
        result.figure(ax=[ax, ax, ax] if not isinstance(ax, list) else ax[0], **options)


def test_throughput_figure_is_each_streams_average_and_peak():
    """A bar a stream and direction at its stream avg (the dark bar) and peak (the light one),
    the values of the table `pcapstats throughput` prints."""
    path = CAPTURES / "tcp_2streams.pcap"
    result = ps.throughput(path)
    fig = result.figure()
    assert_readable(fig, [path.name])
    ax = fig.axes[0]
    widths = sorted(round(p.get_width()) for p in ax.patches)
    table = result.to_pandas()
    want = sorted(round(v) for d in ("a_to_b", "b_to_a")
                  for v in [*table[f"avg_stream_bps_{d}"], *table[f"peak_bps_{d}"]])
    assert widths == want
    assert ax.get_xlabel() == "Rate (Mbit/s)"
    assert "A→B stream avg" in legend_text(fig) and "peak" in legend_text(fig)


def test_throughput_writes_its_figure(tmp_path, capsys):
    out = tmp_path / "streams.png"
    assert main(["throughput", str(CAPTURES / "tcp_2streams.pcap"), "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "tcp" in capsys.readouterr().out         # the table is still printed


# -- zoom: --from / --to, from_s= / to_s= -------------------------------------------------------

ZOOMED = [("iograph", {"interval": 0.05}), ("cwnd", {}), ("rtt", {}), ("seqgraph", {})]


@pytest.mark.parametrize("name, options", ZOOMED, ids=[z[0] for z in ZOOMED])
def test_zoom_cuts_the_time_axis_and_fits_the_other(name, options):
    path = CAPTURES / "sp-reno-loss10pct.pcap"
    result = getattr(ps, name)(path, **options)
    whole = result.figure().axes[0]
    fig = result.figure(from_s=2.0, to_s=2.5)
    assert_readable(fig, [path.name])
    ax = fig.axes[0]
    assert ax.get_xlim() == (2.0, 2.5)
    low, high = ax.get_ylim()
    assert high - low < whole.get_ylim()[1] - whole.get_ylim()[0]   # fitted to the window


@pytest.mark.parametrize("options, message", [
    ({"from_s": 3.0, "to_s": 2.0}, "ends .* before it starts"),
    ({"from_s": -1.0}, "no time in the capture"),
    ({"from_s": 60.0}, "past the end of stream 0's data"),
    ({"to_s": 0.5}, "before the start of stream 0's data"),
])
def test_a_bad_zoom_is_one_clear_error(options, message):
    with pytest.raises(ps.UsageError, match=message):
        ps.cwnd(CAPTURES / "sp-reno-loss10pct.pcap").figure(**options)


@pytest.mark.parametrize("command", ["iograph", "cwnd", "wscale", "rtt", "seqgraph"])
@pytest.mark.parametrize("args, message", [
    (["--from", "3", "--to", "2", "-o", "z.png"], "before it starts"),
    (["--from", "60", "-o", "z.png"], "past the end"),
    (["--from", "1"], "no figure was asked for"),
])
def test_cli_zoom_errors_are_one_line(command, args, message, tmp_path, capsys):
    args = [a if a != "z.png" else str(tmp_path / "z.png") for a in args]
    assert main([command, str(CAPTURES / "sp-reno-loss10pct.pcap"), *args]) == 2
    err = [line for line in capsys.readouterr().err.splitlines()
           if not line.startswith("pcapstats: note")]
    assert len(err) == 1 and err[0].startswith("pcapstats: error: ") and message in err[0], err
    assert not (tmp_path / "z.png").exists()


def test_cli_zoom_writes_the_zoomed_figure(tmp_path):
    out = tmp_path / "z.png"
    assert main(["rtt", str(CAPTURES / "sp-reno-loss10pct.pcap"), "--from", "2", "--to", "2.5",
                 "-o", str(out)]) == 0
    assert out.stat().st_size > 1000
