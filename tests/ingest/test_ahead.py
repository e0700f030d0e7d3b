"""The streaming reader with the compiled kernel one window ahead (ingest._Ahead): the kernel
walks and decodes window k+1 in a thread while the caller analyses window k.  The tables are
the ones read in turn gives (the known answers of crafted files whose sections, interfaces and
records cross window edges), an error comes after the windows before it, as in turn, and the
thread never outlives the read."""
from __future__ import annotations

import struct
import threading

import numpy as np
import pytest

from pcapstats import schema
from pcapstats.capture import Needs
from pcapstats.errors import CorruptCaptureError
from pcapstats.ingest import _cores, packet_windows, read_fast, read_needed
from tests.helpers import craft as c
from tests.helpers.paths import CAPTURES
from tests.ingest.test_formats import BIG, WINDOW, _write

TWO = CAPTURES / "sp-2pairs-reno+cubic.pcap"      # 1 MB: 15 windows of 64 KiB
EVERY_ROW = Needs(tuple(col.name for col in schema.COLUMNS) + ("direction",),
                  lambda cap: np.ones(len(cap), bool))
THREAD = "pcapstats-reader"


def _readers() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == THREAD]


@pytest.mark.parametrize("variant", BIG)
def test_windows_read_ahead_give_the_known_answers(variant, kernel, tmp_path):
    w = BIG[variant]()
    path = _write(tmp_path, w)
    cap = read_needed(path, EVERY_ROW, kernel=kernel, window_bytes=WINDOW)
    problems = c.compare_rows(f"{variant} [{kernel}]", w.rows, c.capture_rows(cap),
                              c.ALL_COLUMNS)
    assert not problems, "\n".join(problems[:50])
    whole = read_fast(path, kernel=kernel)
    assert cap.interfaces == whole.interfaces
    assert np.array_equal(cap.column("direction"), whole.column("direction"))
    assert not _readers()


def test_the_kernel_runs_ahead_with_the_compiled_kernel_alone(kernel):
    seen = []
    total = packet_windows(TWO, lambda cap: seen.append(_readers()), kernel=kernel,
                           window_bytes=WINDOW)
    assert total > 0 and len(seen) > 3
    # the thread ends once it has decoded the last window: the caller's last two may not see it
    ahead = kernel == "c" and _cores() > 1
    assert all(s == ([THREAD] if ahead else []) for s in seen[:-2]), seen
    assert not _readers()


def test_an_error_in_the_callers_work_stops_the_thread(kernel):
    calls = []

    def analyse(cap):
        calls.append(len(cap))
        if len(calls) == 3:
            raise RuntimeError("the analysis failed")
    with pytest.raises(RuntimeError, match="the analysis failed"):
        packet_windows(TWO, analyse, kernel=kernel, window_bytes=WINDOW)
    assert len(calls) == 3 and not _readers()


def test_a_bad_record_comes_after_the_windows_before_it(kernel, tmp_path):
    """A record length no capture has, half-way through: the windows before it are analysed,
    then the reader's one error -- as the numpy kernel, in turn, does."""
    w = BIG["big-pcap"]()
    data = bytearray(w.data)
    at, n = 24, 0
    while n < 1000:                                # the 1000th record's header
        at += 16 + struct.unpack_from("<I", data, at + 8)[0]
        n += 1
    struct.pack_into("<I", data, at + 8, 0x7FFFFFF0)
    path = tmp_path / "bad.pcap"
    path.write_bytes(bytes(data))
    seen = []
    with pytest.raises(CorruptCaptureError) as raised:
        packet_windows(path, lambda cap: seen.append(int(cap.column("frame_number")[-1])),
                       kernel=kernel, window_bytes=WINDOW)
    assert seen and seen[-1] == 1000 and "packet 1001" in str(raised.value)
    assert not _readers()
