"""-j N on every command that takes several captures: the captures run in worker processes
(pcapstats.pool) and the output -- standard output, every stderr line, the exit status -- is
byte for byte the one -j 1 gives in this process; a capture that fails is one line and the
others go on; one capture starts no worker and imports neither the process pool nor Dask."""
import subprocess
import sys

import pytest
from tests.helpers.paths import CAPTURES, DATA

from pcapstats import pool
from pcapstats.cli import main

COMMANDS = ["throughput", "iograph", "retrans", "rtt", "cwnd", "wscale", "seqgraph", "flavour",
            "verify", "ping", "udp", "fairness", "delay", "wifi"]
# TCP, UDP, ICMP and chained captures: every command finds something in some and fails on
# others (rtt on UDP only, ping without echoes), so both paths are compared
SOME = [str(CAPTURES / n) for n in (
    "tcp_2streams.pcap", "sp-reno-loss10pct.pcap", "iperf3-udp-loss1pct.pcap",
    "ping-sweep.pcap", "pingpong-sweep.pcap", "sp-2pairs-reno+cubic.pcap", "udp_ping.pcapng",
    "iperf3-4flows.pcap")] + [str(DATA / "wpa2linkuppassphraseiswireshark.pcap")]


def _run(capsys, argv):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_jobs_give_what_one_process_gives(command, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    started = []
    real = pool._processes
    monkeypatch.setattr(pool, "_processes", lambda *a: started.append(a) or real(*a))
    for fmt in ("csv", "table"):
        started.clear()
        one = _run(capsys, [command, *SOME, "-j", "1", "-f", fmt])
        assert not started
        two = _run(capsys, [command, *SOME, "-j", "2", "-f", fmt])
        assert started, "-j 2 ran no worker process"
        assert two == one, f"{command} -f {fmt}: -j 2 differs from -j 1"
        assert one[1].strip(), f"{command} printed nothing"


def test_a_failing_capture_is_one_line_and_the_others_go_on(tmp_path, capsys):
    bad = tmp_path / "notes.pcap"
    bad.write_text("not a capture\n")
    files = [SOME[0], str(bad), SOME[1]]
    one = _run(capsys, ["throughput", *files, "-j", "1", "-f", "csv"])
    two = _run(capsys, ["throughput", *files, "-j", "2", "-f", "csv"])
    assert two == one
    code, out, err = two
    assert code == 2
    errors = [line for line in err.splitlines() if line.startswith("pcapstats: error:")]
    assert len(errors) == 1 and str(bad) in errors[0] and "Traceback" not in err
    captures = {line.split(",")[0] for line in out.splitlines()[1:]}
    assert captures == {SOME[0], SOME[1]}            # both good captures, in the table


def test_a_bug_on_one_capture_is_its_line_and_exit_3(capsys, monkeypatch):
    """A bug of ours (not a PcapstatsError) stops only its capture, in a worker as here; the
    exit status still says it was a bug (3, as the fuzz harness counts them)."""
    import pcapstats.analyses.throughput as module
    real = module.throughput

    def buggy(path, **options):
        if "loss10" in str(path):
            raise RuntimeError("boom")
        return real(path, **options)
    monkeypatch.setattr(module, "throughput", buggy)       # the workers fork with it
    one = _run(capsys, ["throughput", *SOME[:3], "-j", "1", "-f", "csv"])
    two = _run(capsys, ["throughput", *SOME[:3], "-j", "2", "-f", "csv"])
    assert two == one
    code, out, err = two
    assert code == 3
    assert err.count("internal error: RuntimeError: boom") == 1 and SOME[1] in err
    assert SOME[0] in out and SOME[2] in out


def test_one_capture_starts_no_worker_and_imports_no_pool_nor_dask():
    code = ("import sys; from pcapstats.cli import main; "
            "main(['throughput', sys.argv[1], '-j', '4', '-f', 'csv']); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('dask', 'distributed', 'multiprocessing') or m == 'concurrent.futures.process'),"
            " file=sys.stderr)")
    run = subprocess.run([sys.executable, "-c", code, SOME[0]], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stderr.strip().splitlines()[-1] == "[]", run.stderr


def test_progress_follows_the_workers_to_the_end():
    """The bar's callback: the share of bytes of the captures done, rising to 1, said in
    this process as workers finish (in any order) -- and at all with one job."""
    for jobs in (1, 2):
        seen = []
        outcomes = list(pool.outcomes(_size, SOME[:4], jobs=jobs, progress=seen.append))
        assert [o.result for o in outcomes] == [_size(f) for f in SOME[:4]]
        assert seen and seen == sorted(seen) and seen[-1] == pytest.approx(1.0)


def test_progress_bar_only_on_a_terminal(monkeypatch):
    from pcapstats.cli.output import progress_bar
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert not progress_bar(SOME).show
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert progress_bar(SOME).show and not progress_bar(SOME[:1]).show


def test_jobs_option_is_on_every_several_capture_command(capsys):
    for command in [*COMMANDS, "compare", "export", "report"]:
        with pytest.raises(SystemExit):
            _help(command)
        text = capsys.readouterr().out
        for option in ("--jobs", "--scheduler", "--dask"):
            assert option in text, f"{command} --help lacks {option}"


def _help(command):
    from pcapstats.cli.app import _click_command
    _click_command()([command, "--help"], prog_name="pcapstats")


def _size(path, **options):
    import os
    return os.stat(path).st_size
