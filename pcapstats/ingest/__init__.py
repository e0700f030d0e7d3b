"""Bytes to packet table: map the file, walk and decode it window by window, number streams.

By job: ``fast`` (``read_fast``: the whole table), ``windows`` (streaming passes that keep one
window: ``stream_windows``, ``packet_windows``), ``keepers`` (``read_kept``: one pass handing
each window to keepers, ``Kept``, ``read_needed``) and ``groups`` (``ByStream``: a per-stream
analysis' rows, spilled by stream group past the budget); under them ``source``, ``formats``,
``contract`` and the two kernels.  This module only re-exports the reading API.
"""

from .fast import WINDOW_BYTES, read_fast, reporting_progress
from .keepers import Kept, partial_capture, read_kept, read_needed
from .windows import packet_windows, stream_windows

__all__ = ["WINDOW_BYTES", "Kept", "packet_windows", "partial_capture", "read_fast", "read_kept",
           "read_needed", "reporting_progress", "stream_windows"]
