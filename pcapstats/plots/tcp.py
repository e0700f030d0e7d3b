"""TCP stream figures: cwnd, RTT, sequence (Stevens / tcptrace) and Wireshark's window scaling.

Each function draws the tables of an analysis result (no number is computed here) through the
shared helpers of :mod:`pcapstats.plots` and returns the matplotlib ``Figure``:

- :func:`cwnd_figure` (a cwnd result): Wireshark's bytes in flight per data segment, the cwnd
  estimate, the receiver's window, re-sent segments and the start of each loss episode
  marked, intervals where the estimate is not the cwnd (table ``limited``) shaded;
- :func:`rtt_figure` (an rtt result): the three RTT series;
- :func:`seqgraph_figure` (a seqgraph result): ``stevens`` (one dot per segment at its sequence
  number) or ``tcptrace`` (a bar from seq to next seq per segment, re-sent ones in red, the
  ACK line, the receive-window line, SACK blocks);
- :func:`wscale_figure` (a cwnd result): Wireshark 4.0's Window Scaling graph, bytes in flight
  and the receiver's calculated window against time.
"""

from __future__ import annotations

import numpy as np

from .. import plots

TIME_LABEL = "Time since the capture's first packet (s)"
_SHADE = {"rwnd": ("tab:orange", "receiver-window-limited"),
          "app": ("tab:grey", "application-limited / paced / idle"),
          "recovery": ("tab:red", "loss recovery")}


def _subtitle(result, side: str | None = None) -> str:
    """Which stream of which capture: "TCP stream 0: 10.0.0.1:5000 → 10.0.0.2:80 (reno), a
    sender-side capture"."""
    text = f"TCP stream {result.stream}" + (f": {result.name}" if result.name else "")
    return text + (f"; {side}-side capture" if side else "")


def _title(what: str, result) -> str:
    return f"{what}: {plots.captures_title(result.names)}"


def cwnd_figure(result, *, title: str | None = None):
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    fig, ax = plots.figure(title or _title("Congestion window estimate", result), TIME_LABEL,
                           "Window", subtitle=_subtitle(result, result.side))
    flight, s, rwnd = result.table("flight"), result.table("samples"), result.table("rwnd")
    ax.plot(flight["time_s"], flight["bytes_in_flight"], ".", ms=2, color="tab:blue",
            alpha=0.5, label="bytes in flight (Wireshark)")
    ax.plot(s["time_s"], s["cwnd_bytes"], "-", lw=1.2, color="tab:green",
            label="cwnd estimate (cwnd-limited)")
    largest = np.nanmax(np.r_[flight["bytes_in_flight"].astype(float), 1.0])
    rwnd_max = np.nanmax(np.r_[rwnd["rwnd_bytes"].astype(float), 0.0])
    rwnd_label = "receiver window (calculated)"
    if rwnd_max > largest * 1.3:
        rwnd_label += f", off the scale: up to {plots.human_rate(rwnd_max, 'B')}"
    ax.step(rwnd["time_s"], rwnd["rwnd_bytes"], where="post", lw=1,
            color="tab:purple", label=rwnd_label)
    resent = flight["resent"]
    ax.plot(flight["time_s"][resent], np.nan_to_num(flight["bytes_in_flight"][resent]), "x",
            color="tab:red", ms=4, label="re-sent segment")
    for t in result.table("losses")["start_s"]:
        ax.axvline(t, color="tab:red", lw=0.6, ls="--")
    limited = result.table("limited")
    for start, end, state in zip(limited["start_s"], limited["end_s"], limited["state"]):
        ax.axvspan(start, end, color=_SHADE[state][0], alpha=0.15, lw=0)
    seen = set(limited["state"])
    extra = [Line2D([], [], color="tab:red", lw=0.6, ls="--", label="loss episode starts")]
    extra += [Patch(color=_SHADE[k][0], alpha=0.15, label=_SHADE[k][1]) for k in _SHADE if k in seen]
    ax.set_ylim(0, largest * 1.3)
    plots.rate_axis(ax, largest, "B", "Window")
    plots.legend(ax, extra=extra, loc="upper right")
    return fig


def rtt_figure(result, *, title: str | None = None):
    fig, ax = plots.figure(title or _title("Round-trip time", result), TIME_LABEL, "RTT (ms)",
                           subtitle=_subtitle(result))
    samples = result.table("samples")
    acks = samples["is_data_ack"]
    for name, style, label in (("ack_rtt_ms", ".", "ACK RTT (Wireshark tcp.analysis.ack_rtt)"),
                               ("ack_rtt_karn_ms", "+", "ACK RTT, Karn's rule"),
                               ("ts_rtt_ms", "1", "timestamp echo RTT")):
        have = acks & ~np.isnan(samples[name])
        if have.any():
            ax.plot(samples["time_s"][have], samples[name][have], style, ms=3, label=label)
    on_data = ~acks & ~np.isnan(samples["ts_rtt_ms"])
    if on_data.any():
        ax.plot(samples["time_s"][on_data], samples["ts_rtt_ms"][on_data], "2", ms=3,
                label="timestamp echo RTT, on the data (receiver side)")
    ax.set_ylim(bottom=0)
    plots.legend(ax)
    return fig


def seqgraph_figure(result, *, style: str = "stevens", title: str | None = None):
    kind = "Stevens" if style == "stevens" else "tcptrace"
    fig, ax = plots.figure(title or _title(f"Sequence numbers ({kind})", result), TIME_LABEL,
                           "Relative sequence number (bytes)", subtitle=_subtitle(result))
    seg = result.table("segments")
    new, old = ~seg["resent"], seg["resent"]
    if style == "stevens":
        ax.plot(seg["time_s"][new], seg["tcp_seq"][new], ".", ms=2, color="tab:blue",
                label="segment")
        ax.plot(seg["time_s"][old], seg["tcp_seq"][old], ".", ms=3, color="tab:red",
                label="re-sent segment")
    else:
        ax.vlines(seg["time_s"][new], seg["tcp_seq"][new], seg["tcp_nxtseq"][new],
                  color="tab:blue", lw=1, label="segment (seq to next seq)")
        ax.vlines(seg["time_s"][old], seg["tcp_seq"][old], seg["tcp_nxtseq"][old],
                  color="tab:red", lw=1.5, label="re-sent segment")
        acks = result.table("acks")
        ax.step(acks["time_s"], acks["tcp_ack"], where="post", color="tab:brown", lw=1,
                label="ACK")
        ax.step(acks["time_s"], acks["window_edge"], where="post", color="tab:green", lw=1,
                label="receive window edge (ACK + window)")
        sacks = result.table("sacks")
        if len(sacks["left"]):
            ax.vlines(sacks["time_s"], sacks["left"], sacks["right"], color="tab:olive", lw=2.5,
                      alpha=0.7, label="SACK block")
    plots.legend(ax, loc="upper left")
    return fig


def wscale_figure(result, *, title: str | None = None):
    """Wireshark 4.0 Statistics > TCP Stream Graphs > Window Scaling: bytes in flight (dots) and
    the peer's calculated window size (line) of the data direction."""
    fig, ax = plots.figure(title or _title("Window scaling", result), TIME_LABEL, "Bytes",
                           subtitle=_subtitle(result, result.side))
    flight, rwnd = result.table("flight"), result.table("rwnd")
    ax.plot(flight["time_s"], flight["bytes_in_flight"], ".", ms=2, color="tab:blue",
            label="bytes in flight")
    ax.step(rwnd["time_s"], rwnd["rwnd_bytes"], where="post", color="tab:green",
            lw=1, label="calculated window size (receiver)")
    largest = np.nanmax(np.r_[flight["bytes_in_flight"].astype(float),
                              rwnd["rwnd_bytes"].astype(float), 1.0])
    ax.set_ylim(0, largest * 1.25)
    plots.rate_axis(ax, largest, "B", "Bytes")
    plots.legend(ax, loc="upper left", ncols=2)
    if result.side == "receiver":
        plots.note(ax, "Captured at the receiver: bytes in flight counts what this point saw "
                       "sent and not yet acknowledged, which is almost nothing here (the "
                       "receiver ACKs at once). The sender's window is in `pcapstats cwnd`, "
                       "estimated from the ACKs and the arrivals.")
    return fig
