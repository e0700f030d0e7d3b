"""The sequence analysis of a file a window at a time, as its reader walks it: a keeper of
``ingest.read_kept``.
"""

from __future__ import annotations

from ...capture import Capture
from .inputs import analysis_inputs
from .kernel import new_analyser, run_analyser


class AnalysedWindows:
    """A keeper of ``ingest.read_kept``: the sequence analysis of a file a window at a time, as
    the reader walks it.  The analyser's state is carried from window to window, so every
    number is the one the whole table gives.  Each window goes to ``each(window, src,
    first_time_ns)``: the window, the analyser's inputs and outputs for its analysed packets
    and their ``rows`` (:func:`analysed` makes packet_analysis' columns of them), and the
    file's first time; its answer, unless None, is kept in ``parts`` and the window let go, so
    memory follows the streams and what ``each`` keeps, not the file (``src``'s arrays may be
    the reader's, written over by the next window: keep copies, as a selection of rows is).
    ``timestamps``: with ts_rtt; ``stream``: that stream alone.  ``done`` gives this keeper,
    with ``counts``: the analyser's tcpseq.COUNTS rows of every stream and direction."""

    def __init__(self, each, *, stream: int | None = None, timestamps: bool = False,
                 kernel: str = "auto"):
        self.each, self.stream, self.timestamps = each, stream, timestamps
        self.analyser = new_analyser(kernel)
        self.first_time_ns, self.windows, self.parts, self.counts = None, 0, [], None

    @property
    def seen(self) -> bool:
        return self.windows > 0

    def add(self, window: Capture) -> None:
        if not self.windows:
            self.first_time_ns = window.first_time_ns
        self.windows += 1
        rows, inputs = analysis_inputs(window, self.stream, timestamps=self.timestamps)
        src = {**inputs, **run_analyser(inputs, analyser=self.analyser, whole=False),
               "rows": rows}
        del inputs
        part = self.each(window, src, self.first_time_ns)
        if part is not None:
            self.parts.append(part)

    def done(self, total: int) -> "AnalysedWindows":
        self.counts = self.analyser.counts()
        return self
