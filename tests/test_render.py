"""The human table on hand-built tables whose text is known: one unit and one number of decimals
a unit family, the headings' rule, column blocks with the keys repeated, nothing asked for left
out (pcapstats.render's docstring)."""
import numpy as np

from pcapstats.render import Shown, heading, render


def lines(table, units=None, shown=None, width=200, **options):
    return render(table, "table", units=units or {}, shown=shown, width=width,
                  **options).splitlines()


def column(text_lines, name):
    """The cells under a one-line heading (right-aligned numbers), units line skipped."""
    head = text_lines[0]
    end = head.index(name) + len(name)
    start = max(head.rfind("  ", 0, head.index(name)), 0)
    return [line[start:end].strip() for line in text_lines[2:]]


def test_a_family_has_the_unit_of_its_largest_value_and_one_number_of_decimals():
    """The issue's throughput: 357.3 kbit/s beside 1.38 Mbit/s, 10.25 beside 9.93 Mbit/s: all
    in Mbit/s, the largest with about three significant digits, the smallest two."""
    t = {"avg": np.array([9_927_000.0, 357_300.0]), "peak": np.array([10_246_000, 1_380_000.0])}
    out = lines(t, {"avg": "bit/s", "peak": "bit/s"})
    assert out[1].split() == ["Mbit/s", "Mbit/s"]
    assert column(out, "avg") == ["9.93", "0.36"]
    assert column(out, "peak") == ["10.25", "1.38"]


def test_sizes_keep_four_digits_before_a_prefix_and_share_it():
    """cwnd's 24.62 kB beside 5792 B: both kB, each with its own decimals; 1400 B alone stays
    in B, whole."""
    t = {"max": np.array([24_616.0]), "median": np.array([5792.0])}
    out = lines(t, {"max": "bytes", "median": "bytes"})
    assert out[1].split() == ["kB", "kB"] and out[2].split() == ["24.62", "5.79"]
    assert lines({"mss": np.array([1400, 536])}, {"mss": "bytes"})[2:] == [
        "1400", " 536"]


def test_ratios_tell_a_value_near_one_from_one_and_keep_their_zeros():
    out = lines({"jain": np.array([0.9918, 0.874, 0.9999939])})
    assert [x.strip() for x in out[1:]] == ["0.9918", "0.8740", "1.0000"]


def test_times_keep_their_unit_ns_is_ms_fractions_are_percent():
    t = {"time_s": np.array([0.25, 12.0]), "rtt_ns": np.array([20_350_000, 41_000]),
         "loss": np.array([0.1, 0.0123])}
    out = lines(t, {"time_s": "s", "rtt_ns": "ns", "loss": "fraction"})
    assert out[1].split() == ["s", "ms", "%"]
    assert out[2].split() == ["0.250", "20.350", "10.00"]
    assert out[3].split() == ["12.000", "0.041", "1.23"]


def test_no_e_notation_no_negative_zero_and_infinity_said():
    t = {"tiny": np.array([1e-9, -1e-9]), "big": np.array([1e15, np.inf])}
    text = "\n".join(lines(t, {"big": "bit/s"}))
    assert "e-" not in text and "e+" not in text and "-0.0" not in text and "inf" in text


def test_headings_from_the_view_the_column_or_the_name():
    assert heading("peak_payload_bps_a_to_b") == "peak payload A→B"
    assert heading("bytes_per_s") == "bytes" and heading("time_s") == "time"
    assert heading("bytes") == "bytes" and heading("rtt_min_ms") == "rtt min"
    t = {"payload_bytes_a_to_b": np.array([1]), "payload_bps_a_to_b": np.array([2.0]),
         "cwnd_max_bytes": np.array([3])}
    head = lines(t, {"payload_bytes_a_to_b": "bytes", "payload_bps_a_to_b": "bit/s"},
                 headings={"cwnd_max_bytes": "cwnd max"})[0]
    # two columns that differ only by their unit keep it; a declared heading wins
    assert "payload bytes A→B" in head and "payload bps A→B" in head and "cwnd max" in head


def test_a_two_line_heading_keeps_its_unit_under_it():
    t = {"stream": np.array([0]), "avg": np.array([4_394_000.0])}
    out = lines(t, {"avg": "bit/s"}, [Shown(None, "stream"), Shown("stream avg\nA→B", "avg")])
    assert out[0].rstrip().endswith("stream avg") and out[1].rstrip().endswith("A→B")
    assert out[2].split() == ["Mbit/s"] and out[3].split() == ["0", "4.39"]


def test_a_wide_table_is_printed_in_blocks_each_led_by_its_keys():
    n = 12
    t = {"stream": np.arange(3), **{f"count_{k}": np.arange(3) * 1000 + k for k in range(n)}}
    out = lines(t, width=60)
    blocks = "\n".join(out).split("\n\n")
    assert len(blocks) > 1
    assert all(any(line.startswith("stream") for line in b.splitlines()[:2]) for b in blocks)
    assert sum(line.count("count") for line in out) == n               # none left out
    assert max(len(line) for line in out) <= 60


def test_a_view_leaves_out_its_minor_columns_first_and_says_so():
    t = {"stream": np.arange(2), "a": np.array([1, 2]) * 10**9, "b": np.array([1, 2]),
         "c": np.array([3, 4])}
    shown = [Shown(None, "stream"), Shown("aaaaaaaaaaaaaaaa", "a"),
             Shown("bbbbbbbbbbbbbbbbbbbb", "b", minor=True), Shown("cccccccccccccccc", "c")]
    out = lines(t, shown=shown, width=40)
    assert "bbbb" not in "\n".join(out) and out[-2].startswith("(1 minor column left out")
    assert "bbbb" in lines(t, shown=shown, width=80)[0]
    assert all(len(line) <= 40 for line in out)
