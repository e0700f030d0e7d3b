"""What the kernel's TCP knows about a socket: ``struct tcp_info``, TCP_CONGESTION, and a sampler.

:func:`tcp_info` reads ``getsockopt(IPPROTO_TCP, TCP_INFO)`` and decodes it with :data:`LAYOUT`,
the field list of ``include/uapi/linux/tcp.h`` (Linux 6.18: 280 bytes; Debian 12's own header,
linux-libc-dev 6.1, stops at ``snd_wnd``, 232 bytes).  The struct only ever grows at its end,
and the kernel copies ``min(asked, its size)`` bytes, so a field is decoded only when the
returned bytes cover it: an older kernel simply yields fewer keys.

Values are the kernel's, unconverted (see tcp(7) and the header): times ``rto``, ``ato``,
``rtt``, ``rttvar``, ``min_rtt``, ``rcv_rtt`` in microseconds; ``last_*`` in milliseconds;
``busy_time``, ``rwnd_limited``, ``sndbuf_limited`` in microseconds; ``pacing_rate``,
``max_pacing_rate``, ``delivery_rate`` in bytes per second (2**64-1 = unlimited);
``snd_cwnd``, ``snd_ssthresh`` (2**31-1 = not set yet), ``unacked``, ``sacked``, ``lost``,
``retrans``, ``total_retrans`` in segments; ``bytes_*`` and ``*_wnd``, ``pmtu``, ``*_mss`` in
bytes.  ``state`` is the TCP state (1 = ESTABLISHED), ``ca_state`` the congestion-avoidance
state (0 Open, 1 Disorder, 2 CWR, 3 Recovery, 4 Loss).

:class:`TcpInfoSampler` polls a set of sockets from one thread on a fixed schedule (10 ms by
default) and keeps, per socket, one list per field (columns: compact as JSON) with two clocks:
``t_ns`` (CLOCK_REALTIME, the clock tcpdump stamps packets with, so a sample can be placed on a
capture's time line) and ``t_mono_ns`` (CLOCK_MONOTONIC, for intervals).  The owner calls
:meth:`TcpInfoSampler.remove` just before closing a socket: that takes the last sample, so the
series covers the whole transfer, and the sampler never touches a closed (or reused) descriptor.
"""

from __future__ import annotations

import errno
import socket
import struct
import threading
import time
from typing import Iterable

TCP_INFO = getattr(socket, "TCP_INFO", 11)
TCP_CONGESTION = getattr(socket, "TCP_CONGESTION", 13)
TCP_CA_NAME_MAX = 16

# (name, struct code) in declaration order; "bits:<byte name>" entries are bitfields packed in
# the byte named before them (see _BITFIELDS).  Every member is naturally aligned, so the
# offsets are the running sum of the sizes (checked against the system header by the tests).
LAYOUT: tuple[tuple[str, str], ...] = (
    ("state", "B"), ("ca_state", "B"), ("retransmits", "B"), ("probes", "B"),
    ("backoff", "B"), ("options", "B"), ("_wscale", "B"), ("_app_limited_byte", "B"),
    ("rto", "I"), ("ato", "I"), ("snd_mss", "I"), ("rcv_mss", "I"),
    ("unacked", "I"), ("sacked", "I"), ("lost", "I"), ("retrans", "I"), ("fackets", "I"),
    ("last_data_sent", "I"), ("last_ack_sent", "I"), ("last_data_recv", "I"),
    ("last_ack_recv", "I"),
    ("pmtu", "I"), ("rcv_ssthresh", "I"), ("rtt", "I"), ("rttvar", "I"), ("snd_ssthresh", "I"),
    ("snd_cwnd", "I"), ("advmss", "I"), ("reordering", "I"),
    ("rcv_rtt", "I"), ("rcv_space", "I"),
    ("total_retrans", "I"),
    ("pacing_rate", "Q"), ("max_pacing_rate", "Q"), ("bytes_acked", "Q"),
    ("bytes_received", "Q"), ("segs_out", "I"), ("segs_in", "I"),
    ("notsent_bytes", "I"), ("min_rtt", "I"), ("data_segs_in", "I"), ("data_segs_out", "I"),
    ("delivery_rate", "Q"),
    ("busy_time", "Q"), ("rwnd_limited", "Q"), ("sndbuf_limited", "Q"),
    ("delivered", "I"), ("delivered_ce", "I"),
    ("bytes_sent", "Q"), ("bytes_retrans", "Q"), ("dsack_dups", "I"), ("reord_seen", "I"),
    ("rcv_ooopack", "I"),
    ("snd_wnd", "I"),
    ("rcv_wnd", "I"), ("rehash", "I"),                                    # 6.2
    ("total_rto", "H"), ("total_rto_recoveries", "H"), ("total_rto_time", "I"),  # 6.7
    ("received_ce", "I"), ("delivered_e1_bytes", "I"), ("delivered_e0_bytes", "I"),  # 6.18
    ("delivered_ce_bytes", "I"), ("received_e1_bytes", "I"), ("received_e0_bytes", "I"),
    ("received_ce_bytes", "I"), ("_accecn_word", "I"),
)

# Bitfields (x86 and every little-endian ABI: the first member takes the lowest bits):
# the byte/word they live in -> (name, first bit, width).
_BITFIELDS = {
    "_wscale": (("snd_wscale", 0, 4), ("rcv_wscale", 4, 4)),
    "_app_limited_byte": (("delivery_rate_app_limited", 0, 1), ("fastopen_client_fail", 1, 2)),
    "_accecn_word": (("ecn_mode", 0, 2), ("accecn_opt_seen", 2, 2), ("accecn_fail_mode", 4, 4),
                     ("options2", 8, 24)),
}


def _offsets() -> dict[str, tuple[int, str]]:
    out, pos = {}, 0
    for name, code in LAYOUT:
        out[name] = (pos, code)
        pos += struct.calcsize("<" + code)
    return out


OFFSETS: dict[str, tuple[int, str]] = _offsets()
"""Member name -> (byte offset, struct code); bitfields appear under their container's name."""
SIZE = sum(struct.calcsize("<" + code) for _, code in LAYOUT)
"""Bytes of the newest layout known here (280, Linux 6.18)."""

FIELDS: tuple[str, ...] = tuple(
    f for name, _ in LAYOUT
    for f in ([b[0] for b in _BITFIELDS[name]] if name in _BITFIELDS else [name]))
"""Every decoded field name, in struct order."""

SERIES_FIELDS: tuple[str, ...] = (
    "state", "ca_state", "retransmits", "backoff", "rto", "snd_mss", "rcv_mss", "unacked",
    "sacked", "lost", "retrans", "pmtu", "rtt", "rttvar", "snd_ssthresh", "snd_cwnd", "advmss",
    "reordering", "total_retrans", "pacing_rate", "bytes_acked", "bytes_received", "segs_out",
    "segs_in", "notsent_bytes", "min_rtt", "data_segs_out", "delivery_rate",
    "delivery_rate_app_limited", "busy_time", "rwnd_limited", "sndbuf_limited", "delivered",
    "bytes_sent", "bytes_retrans", "dsack_dups", "reord_seen", "snd_wnd",
)
"""The fields a sampler keeps by default: everything that moves during a transfer."""

_byte_order = "<" if struct.pack("=H", 1) == b"\x01\x00" else ">"
_DECODERS = [(name, off, struct.Struct(_byte_order + code))
             for name, (off, code) in OFFSETS.items()]


def parse_tcp_info(data: bytes) -> dict[str, int]:
    """Decode the bytes of ``struct tcp_info``: every field the bytes fully cover."""
    out: dict[str, int] = {}
    size = len(data)
    for name, off, st in _DECODERS:
        if off + st.size > size:
            break
        value = st.unpack_from(data, off)[0]
        bits = _BITFIELDS.get(name)
        if bits is None:
            out[name] = value
        else:
            for sub, first, width in bits:
                out[sub] = (value >> first) & ((1 << width) - 1)
    return out


def tcp_info_bytes(sock: socket.socket) -> bytes:
    """The raw ``struct tcp_info`` of a TCP socket (as many bytes as this kernel fills)."""
    return sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, SIZE + 64)


def tcp_info(sock: socket.socket) -> dict[str, int]:
    """``struct tcp_info`` of a TCP socket as a dict (see the module docstring for units)."""
    return parse_tcp_info(tcp_info_bytes(sock))


def tcp_congestion(sock: socket.socket) -> str:
    """The congestion control the socket runs ("cubic", "reno", "bbr", ...)."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, TCP_CA_NAME_MAX)
    return raw.split(b"\0", 1)[0].decode("ascii", "replace")


def available_congestion_controls() -> list[str]:
    """What this kernel (or network namespace) has loaded, from /proc."""
    try:
        with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
            return f.read().split()
    except OSError:
        return []


def set_congestion(sock: socket.socket, name: str) -> None:
    """setsockopt TCP_CONGESTION; ValueError with a one-line reason if the kernel refuses.

    ENOENT: no such algorithm loaded.  EPERM: loaded, but not in
    net.ipv4.tcp_allowed_congestion_control and the caller lacks CAP_NET_ADMIN.
    """
    try:
        sock.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, name.encode())
    except OSError as e:
        have = " ".join(available_congestion_controls()) or "unknown"
        if e.errno == errno.ENOENT:
            raise ValueError(f"congestion control {name!r} is not available in this kernel "
                             f"(available: {have}); load its module, e.g. modprobe "
                             f"tcp_{name}") from None
        if e.errno == errno.EPERM:
            raise ValueError(f"congestion control {name!r} needs CAP_NET_ADMIN here (it is not "
                             "in net.ipv4.tcp_allowed_congestion_control); run as root or "
                             "allow it with sysctl") from None
        raise ValueError(f"cannot set congestion control {name!r}: {e.strerror}") from None
    got = tcp_congestion(sock)
    if got != name:
        raise ValueError(f"asked congestion control {name!r}, the kernel runs {got!r}")


class TcpInfoSampler:
    """One thread that samples TCP_INFO of a set of sockets every ``interval_s``.

    Usage::

        sampler = TcpInfoSampler(0.01).start()
        key = sampler.add(sock)          # after connect
        ...                              # the transfer
        sampler.remove(sock)             # last sample; then sock.close()
        stats = sampler.stop()
        columns = sampler.series(key)    # {"t_ns": [...], "t_mono_ns": [...], "snd_cwnd": [...]}

    The schedule is fixed (tick k at start + k * interval): a late round does not shift the
    next ones, and rounds that could not run at all are counted in ``missed_ticks``.
    """

    def __init__(self, interval_s: float = 0.01, fields: Iterable[str] | None = None):
        if not interval_s > 0:
            raise ValueError(f"sampling interval must be > 0 s, not {interval_s}")
        wanted = tuple(fields) if fields is not None else SERIES_FIELDS
        unknown = [f for f in wanted if f not in FIELDS]
        if unknown:
            raise ValueError(f"unknown tcp_info fields: {', '.join(unknown)}")
        self.interval_s = interval_s
        self.fields = wanted
        self._lock = threading.Lock()
        self._active: dict[str, socket.socket] = {}
        self._series: dict[str, dict[str, list[int]]] = {}
        self._final: dict[str, dict[str, int]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._round_starts: list[int] = []
        self._missed = 0
        self._cpu_ns = 0
        self._wall = (0, 0)

    # -- the sockets --------------------------------------------------------------------------
    def add(self, sock: socket.socket, key: str | None = None) -> str:
        """Start sampling sock (its first sample is taken now); returns its key."""
        key = key or f"fd{sock.fileno()}-{len(self._series)}"
        with self._lock:
            if key in self._series:
                raise ValueError(f"sampler already has a socket {key!r}")
            self._series[key] = {"t_ns": [], "t_mono_ns": [], **{f: [] for f in self.fields}}
            self._active[key] = sock
            self._sample(key, sock)
        return key

    def remove(self, sock_or_key: socket.socket | str) -> dict[str, int]:
        """Take the last sample and stop sampling; call it just before closing the socket.

        Returns that last sample, every field (also those not kept in the series)."""
        with self._lock:
            key = self._key(sock_or_key)
            if key not in self._active:  # removed already, or found closed by the thread
                return self._final.get(key, {})
            return self._sample(key, self._active.pop(key))

    def _key(self, sock_or_key) -> str:
        if isinstance(sock_or_key, str):
            return sock_or_key
        for key, sock in self._active.items():
            if sock is sock_or_key:
                return key
        raise KeyError("socket is not being sampled")

    def _sample(self, key: str, sock: socket.socket) -> dict[str, int]:
        """One sample of one socket into its columns (lock held)."""
        try:
            info = tcp_info(sock)
        except OSError:  # closed under us by an owner that did not call remove()
            self._active.pop(key, None)
            return self._final.get(key, {})
        t_ns, t_mono_ns = time.time_ns(), time.monotonic_ns()
        cols = self._series[key]
        cols["t_ns"].append(t_ns)
        cols["t_mono_ns"].append(t_mono_ns)
        for f in self.fields:
            cols[f].append(info.get(f))
        self._final[key] = info
        return info

    # -- the thread ---------------------------------------------------------------------------
    def start(self) -> "TcpInfoSampler":
        if self._thread is not None:
            raise RuntimeError("sampler already started")
        self._thread = threading.Thread(target=self._run, name="tcp-info-sampler", daemon=True)
        self._wall = (time.monotonic_ns(), 0)
        self._thread.start()
        return self

    def _run(self) -> None:
        cpu0 = time.thread_time_ns()
        interval_ns = int(self.interval_s * 1e9)
        t0 = time.monotonic_ns()
        tick = 0
        try:
            while True:
                tick += 1
                now = time.monotonic_ns()
                due = t0 + tick * interval_ns
                if now > due:  # behind: skip the ticks that have passed entirely
                    skipped = (now - due) // interval_ns
                    self._missed += skipped
                    tick += skipped
                    due = t0 + tick * interval_ns
                if self._stop.wait((due - now) / 1e9):
                    break
                self._round_starts.append(time.monotonic_ns())
                with self._lock:
                    for key, sock in list(self._active.items()):
                        self._sample(key, sock)
        finally:
            self._cpu_ns = time.thread_time_ns() - cpu0

    def stop(self) -> dict[str, float | int]:
        """Stop the thread (sockets still registered get their last sample); return stats."""
        if self._thread is not None and self._thread.is_alive():
            self._stop.set()
            self._thread.join()
        with self._lock:
            for key in list(self._active):
                self._sample(key, self._active.pop(key))
        self._wall = (self._wall[0], time.monotonic_ns())
        return self.stats()

    # -- results ------------------------------------------------------------------------------
    @property
    def keys(self) -> list[str]:
        return list(self._series)

    def series(self, key: str) -> dict[str, list[int]]:
        """Columns of one socket's samples: t_ns, t_mono_ns and one list per kept field."""
        return self._series[key]

    def last(self, key: str) -> dict[str, int]:
        """The last full sample of a socket (every field)."""
        return self._final.get(key, {})

    def stats(self) -> dict[str, float | int]:
        """How the sampler kept its schedule and what it cost.

        period_*_s: between the starts of consecutive rounds; cpu_s: CPU time of the sampler
        thread (user + system); cpu_fraction: of one core, over the thread's wall time.
        """
        starts = self._round_starts
        gaps = sorted(b - a for a, b in zip(starts, starts[1:]))
        wall_ns = max(self._wall[1] - self._wall[0], 1) if self._wall[1] else 0

        def pct(p: float) -> float | None:
            return gaps[min(len(gaps) - 1, int(p * len(gaps)))] / 1e9 if gaps else None
        return {"interval_s": self.interval_s, "rounds": len(starts),
                "missed_ticks": int(self._missed), "period_median_s": pct(0.5),
                "period_p95_s": pct(0.95), "period_max_s": gaps[-1] / 1e9 if gaps else None,
                "cpu_s": self._cpu_ns / 1e9,
                "cpu_fraction": self._cpu_ns / wall_ns if wall_ns else None}
