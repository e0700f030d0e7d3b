"""Which congestion control the sender ran (reno, cubic, bbr, or unknown), from a capture.

Built on :mod:`pcapstats.analyses.cwnd` (window samples, loss-recovery episodes with the window
before and after, the side the capture was taken on, the receiver's ACKs), itself built on
the TCP base (``tcpseq``).  Nothing here re-derives a window or a loss episode.

A module a job: ``thresholds`` (every threshold, with where it came from), ``evidence`` (each
piece of evidence, a function of arrays), ``rules`` (``classify``: the evidence weighed, in
order), ``stream`` (``flavour_stream``: one stream's evidence and verdict) and ``result``
(the ``streams`` table, ``Flavour``, the ``flavour`` analysis).  This module only re-exports.
"""

from .evidence import (GrowthFit, ack_clocked_share, app_silence_share, congestion_events,
                       decrease_factors, departure_gap_cv, expected_after, gain_cycling,
                       growth_fits, growth_vote, loss_response, probe_rtt_dips, vote)
from .result import LABELS, STREAMS, Flavour, StreamDetails, flavour
from .rules import classify
from .stream import StreamFlavour, flavour_stream
from . import thresholds
from .thresholds import *  # noqa: F401,F403  (every threshold by its name, as before the split)

__all__ = ["LABELS", "STREAMS", "Flavour", "GrowthFit", "StreamDetails", "StreamFlavour",
           "ack_clocked_share", "app_silence_share", "classify", "congestion_events",
           "decrease_factors", "departure_gap_cv", "expected_after", "flavour", "flavour_stream",
           "gain_cycling", "growth_fits", "growth_vote", "loss_response", "probe_rtt_dips",
           "vote", *(name for name in vars(thresholds) if name.isupper())]
