"""An analysis that declares its Needs must answer on a table of only the rows and columns it
names exactly as on the whole file's: the same tables bit for bit, the same notes (and what
it says a clock step touched), or the same error (what an error says the capture has is the
whole file's); and so must it given the path, read as it reads one (for its Needs, or
streamed by its own keepers), in small windows."""

from __future__ import annotations

import warnings
from unittest import mock

import numpy as np

import pcapstats as ps
from pcapstats.capture import Needs
from pcapstats.ingest import read_needed

SMALL_WINDOW = 1 << 12      # bytes: a shipped capture read for an analysis in many windows


def answer(analysis, cap, **options):
    """What ``analysis`` gives for ``cap``, in a form that compares bit for bit."""
    try:
        result = analysis(cap, **options)
    except ps.PcapstatsError as e:
        return type(e).__name__, str(e)
    tables = {name: {column: _bits(values) for column, values in result.table(name).items()}
              for name in result.table_names}
    return tables, result.notes, result.clock_touched


def _bits(values: np.ndarray):
    return values.dtype.str, (values.tolist() if values.dtype == object else values.tobytes())


def partial_captures(path, needs: Needs):
    """(how, Capture) for each way an analysis can be handed only what it needs: the whole
    table's rows with every column, those rows with only the columns ``needs`` names, and the
    path read for it in small windows."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = ps.read(path)
        rows = needs.rows(whole)
        yield "every column", whole.restricted(rows)
        yield "its columns", whole.restricted(rows, needs)
        yield "read in windows", read_needed(path, needs, window_bytes=SMALL_WINDOW)


def assert_answers_as_on_the_whole_file(analysis, needs: Needs, path, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = answer(analysis, ps.read(path), **options)
    for how, cap in partial_captures(path, needs):
        assert answer(analysis, cap, **options) == expected, how
    with warnings.catch_warnings(), \
            mock.patch("pcapstats.ingest.keepers.WINDOW_BYTES", SMALL_WINDOW):
        warnings.simplefilter("ignore")         # (read_kept's windows when none is given)
        assert answer(analysis, path, **options) == expected, "the path, read in windows"
