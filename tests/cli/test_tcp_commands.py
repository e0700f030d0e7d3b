"""retrans / cwnd / rtt / seqgraph / wscale: tshark's flag counts, one-line errors, figures.

References: tshark 4.0's own ``tcp.analysis.*`` verdicts on public captures (tests/data) for
the retrans counts and events; hand-built captures for the error cases; the figures are
inspected as matplotlib objects (title, axis labels with units, legend).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pcapstats as ps
from pcapstats.analyses.retrans import FLAGS
from pcapstats.cli import main

from tests.helpers import craft
from tests.helpers import tshark_ref
from tests.helpers.conversation import sender_side
from tests.helpers.conversation import write_conversation
from tests.helpers.paths import DATA, PUBLIC



@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_retrans_matches_tshark(name):
    path = DATA / name
    ref = tshark_ref.tcp_analysis_reference(path)
    result = ps.retrans(path)
    streams = ref["stream"].to_numpy(np.int64)
    counts, events = result.to_pandas("counts"), result.to_pandas("events")
    for flag in FLAGS:
        flagged = ref[flag].to_numpy(bool)
        want = {s: int(flagged[streams == s].sum()) for s in np.unique(streams)}
        got = counts.groupby("stream")[flag].sum().to_dict()
        assert {s: got.get(s, 0) for s in want} == want, flag
        frames = set(ref["frame_number"].to_numpy(np.int64)[flagged])
        listed = events["events"].str.split("+").apply(lambda e: flag in e)
        assert set(events["frame_number"][listed]) == frames, flag
    assert counts["packets"].sum() == len(ref)


def _one_line_error(capsys, argv, *needles):
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("pcapstats: error:")]
    assert code == 2, (code, err)
    assert len(errors) == 1 and "Traceback" not in "\n".join(err), err
    for needle in needles:
        assert needle in errors[0], errors[0]


def _udp_and_tcp(path: Path, udp_only=False) -> Path:
    """TCP stream 0 (unless udp_only) and UDP streams 0 and 1."""
    records, t = [], craft.BASE_NS
    if not udp_only:
        records.append(craft.Record(craft.ether(craft.ipv4(
            craft.tcp(1000, 80, seq=1, flags=craft.SYN), craft.A4, craft.B4)), t))
    for port in (53, 54):
        t += 1000
        records.append(craft.Record(craft.ether(craft.ipv4(
            craft.udp(port, 9999, b"x"), craft.A4, craft.B4)), t))
    path.write_bytes(craft.pcap(records, craft.LT_ETHERNET, nano=True).data)
    return path


COMMANDS = ("cwnd", "rtt", "seqgraph", "wscale", "retrans")


@pytest.mark.parametrize("command", COMMANDS)
def test_unknown_stream_is_one_line(command, tmp_path, capsys):
    path = write_conversation(sender_side(), tmp_path / "c.pcap")
    _one_line_error(capsys, [command, "--stream", "7", str(path)], "no TCP stream 7", "0")


@pytest.mark.parametrize("command", COMMANDS)
def test_udp_stream_is_one_line(command, tmp_path, capsys):
    path = _udp_and_tcp(tmp_path / "u.pcap")
    _one_line_error(capsys, [command, "--stream", "1", str(path)], "UDP stream")


@pytest.mark.parametrize("command", COMMANDS[:4])
def test_no_tcp_is_one_line(command, tmp_path, capsys):
    """Nothing to report (exit 1): one line saying what was looked for and what it holds."""
    path = _udp_and_tcp(tmp_path / "u.pcap", udp_only=True)
    assert main([command, str(path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pcapstats: nothing to report: no TCP packets"), err
    assert str(path) in err[0] and "UDP" in err[0], err


@pytest.mark.parametrize("command", COMMANDS)
def test_bad_output_extension_is_one_line(command, tmp_path, capsys):
    path = write_conversation(sender_side(), tmp_path / "c.pcap")
    _one_line_error(capsys, [command, str(path), "-o", str(tmp_path / "x.gif")], ".gif")


def test_a_stream_without_cwnd_samples_says_so(capsys):
    """tcp_zerowindowdead: one data segment, whose TSecr is older than every TSval the receiver
    sends in the capture (tshark's fields), so no ACK times it.  This crashed with an
    IndexError; now the table is empty and the command says why in one line, exit 1."""
    path = DATA / "tcp_zerowindowdead.pcapng"
    ref = tshark_ref.tshark_fields(path, ("tcp.len", "tcp.options.timestamp.tsval",
                                          "tcp.options.timestamp.tsecr", "tcp.srcport"))
    data = ref[ref["tcp.len"].astype(int) > 0]
    assert len(data) == 1
    receiver = ref[ref["tcp.srcport"] != data["tcp.srcport"].iloc[0]]
    assert int(data["tcp.options.timestamp.tsecr"].iloc[0]) < \
        receiver["tcp.options.timestamp.tsval"].astype(int).min()
    result = ps.cwnd(path, stream=0)
    assert result.rows("samples") == 0
    assert main(["cwnd", str(path)]) == 1
    said = [line for line in capsys.readouterr().err.splitlines() if "nothing to" in line]
    assert said == ["pcapstats: nothing to report: no cwnd samples in stream 0 (no data "
                    "segment could be timed against the ACK it was sent after)"]


def test_default_stream_is_named_on_stderr(tmp_path, capsys):
    path = DATA / "sessionhijacking.pcapng"
    counts = ps.retrans(path).table("counts")
    assert len(np.unique(counts["stream"])) > 1
    assert main(["cwnd", str(path), "-f", "csv"]) == 0
    err = capsys.readouterr().err
    assert "pcapstats: note: TCP stream 3: the most payload; --stream N picks another" in err
    assert main(["cwnd", str(path), "-f", "csv", "--explain"]) == 0
    assert "14904 payload bytes, the most of the 5 streams with data" in capsys.readouterr().err


@pytest.mark.parametrize("command, extra", [("cwnd", []), ("cwnd", ["--window-scaling"]),
                                            ("wscale", []), ("rtt", []), ("seqgraph", []),
                                            ("seqgraph", ["--style", "tcptrace"])])
def test_plots_are_written(command, extra, tmp_path, capsys):
    path = write_conversation(sender_side(), tmp_path / "c.pcap")
    for ext in ("png", "svg"):
        out = tmp_path / f"{command}.{ext}"
        assert main([command, str(path), "-o", str(out), *extra]) == 0, capsys.readouterr().err
        assert out.stat().st_size > 1000
    out = tmp_path / f"{command}.csv"
    assert main([command, str(path), "-o", str(out), *extra]) == 0
    assert out.read_text().count("\n") >= 2


def _check_figure(fig, *words):
    ax = fig.axes[0]
    title = ax.get_title() or (fig._suptitle.get_text() if fig._suptitle else "")
    assert title and all(w in title for w in words), title
    assert "(s)" in ax.get_xlabel()
    assert "(" in ax.get_ylabel(), ax.get_ylabel()   # the unit
    (legend,) = fig.legends                           # under the figure, off the data
    assert len(legend.get_texts()) >= 2
    return [t.get_text() for t in legend.get_texts()]


def test_figures_have_title_units_legend(tmp_path):
    cap = ps.read(write_conversation(sender_side(), tmp_path / "c.pcap"))
    result = ps.cwnd(cap)
    labels = _check_figure(result.figure(), "Congestion window", "stream 0")
    assert any("bytes in flight" in t for t in labels) and any("cwnd" in t for t in labels)
    assert any("receiver window" in t for t in labels)
    _check_figure(result.figure(graph="wscale"), "Window scaling")
    _check_figure(ps.rtt(cap).figure(), "Round-trip")
    graph = ps.seqgraph(cap)
    _check_figure(graph.figure(style="stevens"), "Stevens")
    labels = _check_figure(graph.figure(style="tcptrace"), "tcptrace")
    assert "ACK" in labels and any("window" in t for t in labels)
