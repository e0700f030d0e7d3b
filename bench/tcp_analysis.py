"""TCP sequence analysis benchmark: ``ps.tcp_analysis`` against reading the capture, and tshark.

    python bench/tcp_analysis.py [--quick] [--repeat 5] [--data bench/data] [--no-tshark]

On the ingest benchmark's capture (made and cached by bench/ingest.py's recipe, 1.77M packets
of real iperf3 TCP), in one process: the median of --repeat runs of ``ps.read(F)``, of the
analysis as numpy columns (``packet_analysis``, what the other analyses read) and as a DataFrame
(``tcp_analysis``), and of the compiled analyser alone; the Python fallback on the 50k-packet
cut, scaled to the whole capture; then ``tshark -o tcp.analyze_sequence_numbers:TRUE -T fields``
of the analysis fields as a separate process (once; it takes about a minute). Prints each time
and the ratios the issue sets targets for. Speed is printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import ingest  # noqa: E402  (the capture: ensure_capture, cached in bench/data)

TSHARK_FIELDS = ["frame.number", "tcp.stream", "tcp.analysis.flags",
                 "tcp.analysis.bytes_in_flight", "tcp.analysis.ack_rtt", "tcp.seq", "tcp.ack",
                 "tcp.window_size"]


def median_time(work, repeat: int) -> tuple[float, object]:
    """Median wall seconds of ``work()`` over ``repeat`` runs (after one untimed warm-up run,
    which also touches the memory the runs reuse), and the last result."""
    result = work()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def tshark_seconds(path: Path) -> tuple[float, int]:
    cmd = ["tshark", "-n", "-o", "tcp.analyze_sequence_numbers:TRUE",
           "-o", "tcp.relative_sequence_numbers:TRUE", "-r", str(path), "-T", "fields"]
    for f in TSHARK_FIELDS:
        cmd += ["-e", f]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return time.perf_counter() - t0, out.count("\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=HERE / "data")
    ap.add_argument("--quick", action="store_true", help="the ~200k-packet capture")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per row (median shown)")
    ap.add_argument("--no-tshark", action="store_true", help="skip the (slow) tshark row")
    args = ap.parse_args()

    files = ingest.ensure_capture(args.data, args.quick, remake=False)
    import pandas  # noqa: F401  (a notebook has it loaded: keep its import out of the clock)

    import pcapstats as ps
    from pcapstats.analyses import tcp_analysis as ta
    from pcapstats.analyses import tcpseq
    from pcapstats.analyses.tcpseq import kernel_c

    if not kernel_c.c_analyser_available():
        print("bench: the compiled analyser is not built; the analysis rows use the Python "
              "fallback", file=sys.stderr)
    path = files.pcap
    read_s, cap = median_time(lambda: ps.read(path), args.repeat)
    columns_s, table = median_time(lambda: tcpseq.packet_analysis(cap), args.repeat)
    frame_s, _ = median_time(lambda: ta.tcp_analysis(cap).to_pandas(), args.repeat)
    rows, inputs = tcpseq.analysis_inputs(cap)
    inputs_s, _ = median_time(lambda: tcpseq.analysis_inputs(cap), args.repeat)
    core_s, _ = median_time(lambda: tcpseq.run_analyser(inputs), args.repeat)
    cut = ps.read(files.cut)
    t0 = time.perf_counter()
    tcpseq.packet_analysis(cut, kernel="python")
    python_s = (time.perf_counter() - t0) * len(cap) / len(cut)
    n = len(table["frame_number"])

    print(f"capture: {path} ({len(cap):,} packets, {n:,} TCP); median of {args.repeat} runs; "
          f"load average {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    print(f"{'what':<52} {'s':>8} {'packets/s':>12}  ratio")
    rows_out = [
        ("ps.read(F)", read_s, "1.00x read"),
        ("packet_analysis(cap)  (numpy, what the analyses read)", columns_s,
         f"{columns_s / read_s:.2f}x read (target <= 3x)"),
        ("ps.tcp_analysis(cap).to_pandas()  (DataFrame)", frame_s,
         f"{frame_s / read_s:.2f}x read"),
        ("  of which: inputs from the packet table", inputs_s, f"{inputs_s / read_s:.2f}x read"),
        ("  of which: compiled analyser (_tcpseq)", core_s, f"{core_s / read_s:.2f}x read"),
        ("Python fallback (50k cut, scaled)", python_s, f"~{python_s / read_s:.0f}x read"),
    ]
    if not args.no_tshark:
        tshark_s, lines = tshark_seconds(path)
        rows_out.append((f"tshark -T fields ({len(TSHARK_FIELDS)} analysis fields, 1 run)",
                         tshark_s, f"{tshark_s / (read_s + columns_s):.0f}x read+analysis"))
        if lines != len(cap):
            print(f"(!) tshark printed {lines:,} lines for {len(cap):,} packets")
    for name, s, ratio in rows_out:
        print(f"{name:<52} {s:8.3f} {len(cap) / s:12,.0f}  {ratio}")


if __name__ == "__main__":
    main()
