"""TCP stream figures: cwnd, RTT, sequence (Stevens / tcptrace) and Wireshark's window scaling.

Each function draws the tables of an analysis result (no number is computed here) through the
shared helpers of :mod:`pcapstats.plots` and returns the matplotlib ``Figure`` (or, given
``ax``, draws into that Axes and returns it).  ``from_s`` / ``to_s`` zoom on a time window as
Wireshark's zoom does (seconds since the capture's first packet; the y axis fits what is in
it):

- :func:`cwnd_figure` (a cwnd result): Wireshark's bytes in flight per data segment, the cwnd
  estimate, the receiver's window, re-sent segments and the start of each loss episode
  marked, intervals where the estimate is not the cwnd (table ``limited``) shaded; the y axis
  fits both the estimate and the flight (at the receiver the flight is near 0, the cwnd not);
- :func:`rtt_figure` (an rtt result): the path's round trip as the ``path`` table names it,
  its base (min) and under-load (median) lines, and the other series only where they span the
  whole round trip on this capture's side (``Rtt.round_trips``): the receiver's ACK delay or
  the sender's turnaround is no RTT and is not drawn;
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
_SHADE = {"recovery": ("tab:red", "loss recovery"),
          "rwnd": ("tab:orange", "receiver-window-limited"),
          "zero_window": ("tab:brown", "zero window"),
          "sender": ("tab:grey", "sender-limited (application, send buffer, pacing)"),
          "idle": ("tab:olive", "idle")}
_SERIES = {"ack_rtt_karn_ms": "ACK RTT, Karn's rule (no re-sent segment)",
           "ack_rtt_ms": "ACK RTT, Wireshark's tcp.analysis.ack_rtt (a re-sent segment's "
                         "includes its timeout)",
           "ts_rtt_ms": "timestamp-echo RTT (includes the receiver's delayed-ACK wait)"}
_OTHER_STYLES = (("+", "tab:orange"), ("1", "tab:green"))


def _subtitle(result, side: str | None = None) -> str:
    """Which stream of which capture: "TCP stream 0: 10.0.0.1:5000 → 10.0.0.2:80 (reno), a
    sender-side capture"."""
    text = f"TCP stream {result.stream}" + (f": {result.name}" if result.name else "")
    return text + (f"; {side}-side capture" if side else "")


def _title(what: str, result) -> str:
    return f"{what}: {plots.captures_title(result.names)}"


def _extent(*times) -> tuple[float, float]:
    """The first and last of several time columns (0, 0 when all are empty)."""
    present = [np.asarray(t, float) for t in times if len(t)]
    if not present:
        return 0.0, 0.0
    return float(min(t.min() for t in present)), float(max(t.max() for t in present))


def _ms(value: float) -> str:
    """A time in ms to three digits, without e-notation: 20.2, 0.589, 3410."""
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"


def _top(*values) -> float:
    """The largest of the values (NaN left out), at least 1."""
    arrays = [np.asarray(v, float) for v in values]
    return float(np.nanmax(np.concatenate([*arrays, [1.0]])))


RECEIVER_CWND_NOTE = ("Captured at the receiver: the cwnd is estimated from the receiver's ACKs "
                      "and the data they released; Wireshark's bytes in flight here is only "
                      "what the receiver has not yet acknowledged.")


def cwnd_figure(result, *, ax=None, from_s=None, to_s=None, title: str | None = None,
                key: bool = True):
    """``key``: draw the legend and the note (a figure of several cwnd panels draws one for
    all: the entries are :func:`cwnd_key`'s)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    window = plots.time_window(from_s, to_s)
    receiver = result.side == "receiver"
    fig, axes = plots.figure(title or _title("Congestion window estimate", result), TIME_LABEL,
                             "Window", subtitle=_subtitle(result, result.side), ax=ax)
    flight, s, rwnd = result.table("flight"), result.table("samples"), result.table("rwnd")
    span = plots.zoom(axes, window, *_extent(flight["time_s"], s["time_s"]),
                      f"stream {result.stream}'s data")
    axes.plot(flight["time_s"], flight["bytes_in_flight"], ".", ms=2, color="tab:blue",
              alpha=0.5, label="bytes in flight seen here (Wireshark)"
              + ("; at the receiver only what it has not yet ACKed" if receiver else ""))
    axes.plot(s["time_s"], s["cwnd_bytes"], "-", lw=1.2, color="tab:green",
              label="cwnd estimate (cwnd-limited)")
    largest = _top(flight["bytes_in_flight"][plots.in_view(flight["time_s"], span)],
                   s["cwnd_bytes"][plots.in_view(s["time_s"], span)])
    seen = rwnd["rwnd_bytes"][plots.in_view(rwnd["time_s"], span)].astype(float)
    rwnd_max = float(np.nanmax(np.r_[seen, 0.0]))
    axes.step(rwnd["time_s"], rwnd["rwnd_bytes"], where="post", lw=1,
              color="tab:purple", label="receiver window (calculated)")
    if rwnd_max > largest * 1.1:        # said in the panel: each panel of a figure has its own
        axes.annotate(f"receiver window off the scale: up to {plots.human_rate(rwnd_max, 'B')}",
                      xy=(0.99, 0.97), xycoords="axes fraction", ha="right", va="top",
                      fontsize="x-small", color="tab:purple",
                      bbox={"fc": "white", "ec": "none", "alpha": 0.85, "pad": 1})
    resent = flight["resent"]
    axes.plot(flight["time_s"][resent], np.nan_to_num(flight["bytes_in_flight"][resent]), "x",
              color="tab:red", ms=4, label="re-sent segment")
    for t in result.table("losses")["start_s"]:
        axes.axvline(t, color="tab:red", lw=0.6, ls="--")
    limited = result.table("limited")
    for start, end, state in zip(limited["start_s"], limited["end_s"], limited["limit"]):
        if state in _SHADE:
            axes.axvspan(start, end, color=_SHADE[state][0], alpha=0.15, lw=0)
    states = set(limited["limit"])
    extra = [Line2D([], [], color="tab:red", lw=0.6, ls="--", label="loss episode starts")]
    extra += [Patch(color=_SHADE[k][0], alpha=0.15, label=_SHADE[k][1])
              for k in _SHADE if k in states]
    axes.set_ylim(0, largest * 1.1)
    plots.rate_axis(axes, largest, "B", "Window")
    if key:
        plots.legend(axes, extra=extra)
    if receiver and key:
        plots.note(axes, RECEIVER_CWND_NOTE)
    return plots.drawn(fig, ax)


def cwnd_key(axes, limits=()) -> list:
    """Legend entries for cwnd panels: the labelled lines of ``axes`` (each once) and the
    shade of each of ``limits`` that has one."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    entries = {}
    for a in axes:
        for handle, label in zip(*a.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    entries["loss episode starts"] = Line2D([], [], color="tab:red", lw=0.6, ls="--")
    for limit, (colour, label) in _SHADE.items():
        if limit in limits:
            entries[label] = Patch(color=colour, alpha=0.15)
    return [(handle, label) for label, handle in entries.items()]


def rtt_figure(result, *, ax=None, from_s=None, to_s=None, title: str | None = None):
    window = plots.time_window(from_s, to_s)
    path = {name: values[0] for name, values in result.table("path").items()}
    fig, axes = plots.figure(title or _title("Round-trip time", result), TIME_LABEL, "RTT (ms)",
                             subtitle=_subtitle(result, path["side"]), ax=ax)
    samples = result.table("samples")
    span = plots.zoom(axes, window, *_extent(samples["time_s"]),
                      f"stream {result.stream}'s RTT samples")
    view = plots.in_view(samples["time_s"], span)
    series = result.round_trips()
    chosen = path["estimate"].split()
    if path["estimate"] == "handshake":
        series = []
    else:
        series = [tuple(chosen)] + [s for s in series if s != tuple(chosen)]
    drawn = []
    for k, (name, direction) in enumerate(series):
        have = (samples["direction"] == direction) & ~np.isnan(samples[name])
        if have.any():
            drawn.append((k, name, have))
    path_values = samples[chosen[0]][drawn[0][2] & view] if drawn and drawn[0][0] == 0 else []
    base, load = path["rtt_min_ms"], path["rtt_median_ms"]
    top = 1.15 * _top(path_values, [load])
    for k, name, have in drawn:
        t, v = samples["time_s"][have], samples[name][have]
        if k == 0:
            label = f"path RTT: {_SERIES[name]}"
            axes.plot(t, v, ".", ms=3, color="tab:blue", label=label, zorder=3)
            continue
        marker, colour = _OTHER_STYLES[(k - 1) % len(_OTHER_STYLES)]
        seen = plots.in_view(t, span)
        above = (v > top) & seen
        label = f"also a round trip here: {_SERIES[name]}"
        if above.any():
            label += (f"; {int(above.sum())} above the axis (▲), up to "
                      f"{np.nanmax(v[seen]):.0f} ms")
            marks, = axes.plot(t[above], np.full(above.sum(), top), "^", ms=5, color=colour,
                               clip_on=False)
            marks.set_in_layout(False)        # on the axis' top edge, not a new margin
        axes.plot(t[v <= top], v[v <= top], marker, ms=4, color=colour, alpha=0.6,
                  label=label)
    what = "the handshake's RTT (SYN → first ACK, tshark's iRTT)" \
        if path["estimate"] == "handshake" else "base RTT (min)"
    if base == base:
        axes.axhline(base, color="tab:blue", ls="--", lw=1, label=f"{what}: {_ms(base)} ms")
    if path["estimate"] != "handshake":
        axes.axhline(load, color="tab:blue", ls=":", lw=1.2,
                     label=f"RTT under load (median): {_ms(load)} ms")
    axes.set_ylim(0, top)
    plots.legend(axes)
    if path["estimate"] == "handshake":
        plots.note(axes, (f"{path['why']}." if base == base else "The capture holds no "
                          "handshake.") + " No per-packet sample spans the whole round trip "
                         "at this capture point (each times one leg from it), so none is "
                         "drawn; `pcapstats rtt` lists them.")
    elif len(drawn) == 1:
        plots.note(axes, "Only the path's own series is a round trip at this capture point; "
                         "the others time one leg from it (the receiver's ACK delay, the "
                         "sender's turnaround) and are not drawn (`pcapstats rtt` lists them).")
    return plots.drawn(fig, ax)


def seqgraph_figure(result, *, style: str = "stevens", ax=None, from_s=None, to_s=None,
                    title: str | None = None):
    window = plots.time_window(from_s, to_s)
    kind = "Stevens" if style == "stevens" else "tcptrace"
    fig, axes = plots.figure(title or _title(f"Sequence numbers ({kind})", result), TIME_LABEL,
                             "Relative sequence number", subtitle=_subtitle(result), ax=ax)
    seg, acks = result.table("segments"), result.table("acks")
    span = plots.zoom(axes, window, *_extent(seg["time_s"], acks["time_s"]),
                      f"stream {result.stream}'s data")
    new, old = ~seg["resent"], seg["resent"]
    if style == "stevens":
        axes.plot(seg["time_s"][new], seg["tcp_seq"][new], ".", ms=2, color="tab:blue",
                  label="segment")
        axes.plot(seg["time_s"][old], seg["tcp_seq"][old], ".", ms=3, color="tab:red",
                  label="re-sent segment")
    else:
        axes.vlines(seg["time_s"][new], seg["tcp_seq"][new], seg["tcp_nxtseq"][new],
                    color="tab:blue", lw=1, label="segment (seq to next seq)")
        axes.vlines(seg["time_s"][old], seg["tcp_seq"][old], seg["tcp_nxtseq"][old],
                    color="tab:red", lw=1.5, label="re-sent segment")
        axes.step(acks["time_s"], acks["tcp_ack"], where="post", color="tab:brown", lw=1,
                  label="ACK")
        axes.step(acks["time_s"], acks["window_edge"], where="post", color="tab:green", lw=1,
                  label="receive window edge (ACK + window)")
        sacks = result.table("sacks")
        if len(sacks["left"]):
            axes.vlines(sacks["time_s"], sacks["left"], sacks["right"], color="tab:olive",
                        lw=2.5, alpha=0.7, label="SACK block")
    here = plots.in_view(seg["time_s"], span)
    plots.rate_axis(axes, _top(seg["tcp_nxtseq"][here], seg["tcp_seq"][here]), "B",
                    "Relative sequence number")         # kB, MB: no 1e6 over the axis
    if span is not None:          # the y axis fits the segments and ACKs in the window
        values = [seg["tcp_seq"][here], seg["tcp_nxtseq"][here]]
        if style == "tcptrace":
            values.append(acks["tcp_ack"][plots.in_view(acks["time_s"], span)])
        values = np.concatenate([np.asarray(v, float) for v in values])
        values = values[~np.isnan(values)]
        if len(values):
            low, high = values.min(), values.max()
            margin = max(0.05 * (high - low), 1.0)
            axes.set_ylim(low - margin, high + margin)
            edge = acks["window_edge"][plots.in_view(acks["time_s"], span)]
            if style == "tcptrace" and len(edge) and edge.min() > high + margin:
                line = [a for a in axes.get_lines() if a.get_label().startswith("receive")]
                line[0].set_label(line[0].get_label() + ": above the axis in this zoom")
    plots.legend(axes)
    return plots.drawn(fig, ax)


def wscale_figure(result, *, ax=None, from_s=None, to_s=None, title: str | None = None):
    """Wireshark 4.0 Statistics > TCP Stream Graphs > Window Scaling: bytes in flight (dots) and
    the peer's calculated window size (line) of the data direction."""
    window = plots.time_window(from_s, to_s)
    fig, axes = plots.figure(title or _title("Window scaling", result), TIME_LABEL, "Bytes",
                             subtitle=_subtitle(result, result.side), ax=ax)
    flight, rwnd = result.table("flight"), result.table("rwnd")
    span = plots.zoom(axes, window, *_extent(flight["time_s"], rwnd["time_s"]),
                      f"stream {result.stream}'s data")
    axes.plot(flight["time_s"], flight["bytes_in_flight"], ".", ms=2, color="tab:blue",
              label="bytes in flight")
    axes.step(rwnd["time_s"], rwnd["rwnd_bytes"], where="post", color="tab:green",
              lw=1, label="calculated window size (receiver)")
    largest = _top(flight["bytes_in_flight"][plots.in_view(flight["time_s"], span)],
                   rwnd["rwnd_bytes"][plots.in_view(rwnd["time_s"], span)])
    axes.set_ylim(0, largest * 1.1)
    plots.rate_axis(axes, largest, "B", "Bytes")
    plots.legend(axes)
    if result.side == "receiver":
        plots.note(axes, "Captured at the receiver: bytes in flight counts what this point saw "
                         "sent and not yet acknowledged, which is almost nothing here (the "
                         "receiver ACKs at once). The sender's window is in `pcapstats cwnd`, "
                         "estimated from the ACKs and the arrivals.")
    return plots.drawn(fig, ax)
