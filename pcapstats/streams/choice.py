"""Stream choice: the TCP stream a per-stream analysis was asked for, checked, or the TCP
stream with the most payload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .. import schema
from ..errors import Note, NothingToReport, UsageError
from .names import id_ranges
from .summary import stream_summary

if TYPE_CHECKING:
    from ..capture import Capture


@dataclass(frozen=True)
class StreamChoice:
    """The TCP stream a per-stream analysis works on, and how it was picked."""
    stream: int
    chosen: bool           # True when picked by default (the analysis says which in a note)
    payload_bytes: int
    streams_with_data: int

    def note(self) -> Note | None:
        """What to tell the user when the stream was picked for them, else None."""
        if not self.chosen or self.streams_with_data <= 1:
            return None
        return Note("the most payload; --stream N picks another",
                    about=f"TCP stream {self.stream}",
                    detail=f"{self.payload_bytes} payload bytes, the most of the "
                           f"{self.streams_with_data} streams with data; pick another with "
                           "stream=N (--stream N)")


def require_tcp(cap: "Capture") -> None:
    """NothingToReport when the capture has no TCP packet: the one line every TCP analysis
    says then, with what the capture holds."""
    if not cap.layer_count(schema.TCP):
        raise NothingToReport(f"no TCP packets in {cap.path} ({cap.holds()})",
                              hint="this analysis works on TCP streams; `pcapstats throughput` "
                                   "lists the streams there are")


def choose_stream(cap: "Capture", stream: int | None) -> StreamChoice:
    """The TCP stream asked for, checked, or by default the one with the most payload bytes;
    one clear error when there is none to analyse (no TCP: NothingToReport; a UDP stream, no
    such stream: UsageError)."""
    tcp = stream_summary(cap, proto="tcp")
    ids = tcp["stream"]
    if len(ids) == 0:
        require_tcp(cap)
        raise NothingToReport(f"no TCP stream in {cap.path} ({cap.holds()})",
                              hint="`pcapstats throughput` lists the streams there are")
    payload = tcp["payload_bytes_a_to_b"] + tcp["payload_bytes_b_to_a"]
    with_data = int((payload > 0).sum())
    if stream is None:
        best = int(np.argmax(payload))
        return StreamChoice(int(ids[best]), True, int(payload[best]), with_data)
    at = np.flatnonzero(ids == stream)
    if len(at) == 0:
        udp = stream_summary(cap, proto="udp")["stream"]
        what = (f"stream {stream} is a UDP stream, not TCP" if (udp == stream).any()
                else f"no TCP stream {stream} in this capture")
        raise UsageError(what, path=cap.path, hint=f"TCP streams here: {id_ranges(ids)}")
    return StreamChoice(int(stream), False, int(payload[at[0]]), with_data)
