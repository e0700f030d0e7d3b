"""The public API is exactly what pcapstats/__init__.py re-exports, and each name resolves."""
import pcapstats as ps


def test_exported_names_are_exactly_the_intended_ones():
    assert sorted(ps.__all__) == sorted([
        "Capture", "read", "throughput", "throughput_file", "THROUGHPUT_COLUMNS",
        "tcp_analysis", "tcp_analysis_columns", "TCP_ANALYSIS_COLUMNS",
        "iograph", "iograph_many", "IOGraph",
        "cwnd", "cwnd_analysis", "retrans", "rtt", "rtt_summary", "seqgraph",
        "verify", "Verification", "Expected", "reassemble",
        "flavour", "FLAVOUR_COLUMNS",
        "PcapstatsError", "CaptureOpenError", "CaptureFormatError", "CorruptCaptureError",
        "EngineError", "UsageError", "PcapstatsWarning", "TruncatedCaptureWarning",
        "SkippedPacketsWarning", "__version__",
    ])
    for name in ps.__all__:
        assert getattr(ps, name) is not None


def test_error_family():
    for cls in (ps.CaptureOpenError, ps.CaptureFormatError, ps.CorruptCaptureError,
                ps.EngineError, ps.UsageError):
        assert issubclass(cls, ps.PcapstatsError)
    assert issubclass(ps.CorruptCaptureError, ps.CaptureFormatError)
    e = ps.CorruptCaptureError("bad block", path="x.pcapng", offset=128, packet=3, hint="fix it")
    assert str(e) == "bad block (x.pcapng, file offset 128, packet 3). Fix it"
    assert (e.offset, e.packet) == (128, 3)
