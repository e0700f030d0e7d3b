"""Every unit pcapstats reads from people, in one place: rates, times, loss, and two kinds of size.

Two size conventions live side by side on purpose, named apart so they are never confused:

- :func:`parse_tc_size` reads queue sizes as tc(8) does: ``kb``/``mb`` are x1024, ``p``/``pkt``
  full Ethernet frames (:data:`FRAME_BYTES`), a bare number bytes (the lab's ``--queue``);
- :func:`parse_simpleperf_size` reads simpleperf's ``-n``: ``B``, ``KB`` = 1000, ``MB`` =
  1000 x 1000, as the course's tool defines them (its ``-f`` output units are the same).

Rates and times follow tc(8) too: ``kbit``/``mbit``/``gbit`` are bits per second (SI,
``kibit``... binary), ``bps``/``kbps``/``mbps``/``gbps`` are BYTES per second (``1mbps`` is 8
Mbit/s); times ``s``/``ms``/``us`` (``sec``, ``msec``, ``usec`` too).  A bare number is refused
for rates and times (tc would read bits/s and microseconds, rarely what was meant).  Every
parser raises one UsageError line naming the text and what to write instead.
"""

from __future__ import annotations

import math

import re

from pcapstats.errors import UsageError

FRAME_BYTES = 1514  # a full Ethernet frame at MTU 1500, as tbf and netem count it (no FCS)
SIMPLEPERF_UNITS = {"B": 1, "KB": 1000, "MB": 1000 * 1000}

_RATE_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
               "kibit": 2**10, "mibit": 2**20, "gibit": 2**30, "tibit": 2**40,
               "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9, "tbps": 8e12,
               "kibps": 8 * 2**10, "mibps": 8 * 2**20, "gibps": 8 * 2**30, "tibps": 8 * 2**40}
_TIME_UNITS = {"s": 1, "sec": 1, "secs": 1, "ms": 1e-3, "msec": 1e-3, "msecs": 1e-3,
               "us": 1e-6, "usec": 1e-6, "usecs": 1e-6}
_SIZE_UNITS = {"": 1, "b": 1, "k": 2**10, "kb": 2**10, "m": 2**20, "mb": 2**20, "g": 2**30,
               "gb": 2**30, "p": FRAME_BYTES, "pkt": FRAME_BYTES, "pkts": FRAME_BYTES,
               "packets": FRAME_BYTES}
_NUMBER_UNIT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z%]*)\s*$", re.I)


def _split(text: str, what: str, example: str) -> tuple[float, str]:
    match = _NUMBER_UNIT.match(str(text))
    if not match:
        raise UsageError(f"bad {what} {text!r}: not a number with a unit",
                         hint=f"write it like {example}")
    return float(match.group(1)), match.group(2).lower()


def parse_rate(text: str) -> float:
    """"30mbit" -> 30e6 bit/s; tc's units (``mbps`` = megaBYTES/s); a unit is required."""
    value, unit = _split(text, "rate", "30mbit, 500kbit or 1.5gbit")
    if unit not in _RATE_UNITS:
        hint = ("give a unit, e.g. 30mbit" if not unit else
                "units: bit, kbit, mbit, gbit (bits/s) or bps, kbps, mbps (BYTES/s, as tc)")
        raise UsageError(f"bad rate {text!r}: " + ("no unit" if not unit else
                                                   f"unknown unit {unit!r}"), hint=hint)
    bps = value * _RATE_UNITS[unit]
    if bps <= 0:
        raise UsageError(f"bad rate {text!r}: must be above zero")
    return check_rate(bps, f"rate {text!r}")


def parse_time(text: str) -> float:
    """"20ms" -> 0.020 s; units s, ms, us (tc's); a unit is required."""
    value, unit = _split(text, "time", "20ms, 0.5s or 100us")
    if unit not in _TIME_UNITS:
        raise UsageError(f"bad time {text!r}: " + ("no unit" if not unit else
                                                   f"unknown unit {unit!r}"),
                         hint="units: s, ms, us, e.g. 20ms")
    return check_duration(value * _TIME_UNITS[unit], f"time {text!r}", zero=True)


def parse_loss(text: str) -> float:
    """"10%" or "0.1" -> 0.1 (a fraction of packets, 0 to 1; a bare 1 or more is refused,
    since "--loss 1" almost always means 1 %, not every packet)."""
    value, unit = _split(text, "loss", "10% or 0.1")
    if unit not in ("", "%"):
        raise UsageError(f"bad loss {text!r}: unknown unit {unit!r}", hint="write 10% or 0.1")
    fraction = value / 100 if unit == "%" else value
    if unit == "%" and fraction > 1:
        raise UsageError(f"bad loss {text!r}: more than 100 %")
    if unit == "" and fraction >= 1:   # "1" as a fraction is every packet: surely meant 1 %
        raise UsageError(f"bad loss {text!r}: a bare number is a fraction of packets, and "
                         f"{value:g} would drop {'every packet' if value == 1 else 'more than all'}",
                         hint=f"write {value:g}% for {value:g} percent")
    return fraction


def quantity(text: str) -> tuple[float, str] | None:
    """What a label's text says as a number, read with the units above: ``"10%"`` -> (0.1,
    "fraction"), ``"20ms"`` -> (0.02, "s"), ``"30mbit"`` -> (30e6, "bit/s"), a bare number ->
    (its value, ""), a sign allowed; None for anything else (a word, ``"2ms,5ms"``, ``"10m"``)."""
    text = str(text).strip()
    sign = -1.0 if text[:1] == "-" else 1.0
    match = _NUMBER_UNIT.match(text[1:] if text[:1] in "+-" and text[1:2] != "" else text)
    if not match:
        return None
    value, unit = sign * float(match.group(1)), match.group(2).lower()
    if unit == "%":
        return value / 100, "fraction"
    if unit in _TIME_UNITS:
        return value * _TIME_UNITS[unit], "s"
    if unit in _RATE_UNITS:
        return value * _RATE_UNITS[unit], "bit/s"
    return (value, "") if unit == "" and math.isfinite(value) else None


def parse_tc_size(text: str) -> int:
    """A queue size as tc(8) writes it: "64kb" -> 65536 bytes (kb = 1024, as tc), "100p" -> 100
    full frames in bytes, "1500" -> 1500 bytes."""
    value, unit = _split(text, "size", "64kb, 100p or 150000")
    if unit not in _SIZE_UNITS:
        raise UsageError(f"bad size {text!r}: unknown unit {unit!r}",
                         hint="units: b, kb, mb (x1024, as tc) or p (full frames)")
    size = value * _SIZE_UNITS[unit]
    if not math.isfinite(size) or round(size) <= 0:
        raise UsageError(f"bad size {text!r}: must be above zero")
    return round(size)          # its limit is the queue's (lab.impair: tbf's 32 bits)


def parse_simpleperf_size(text: str) -> int:
    """simpleperf's ``-n``: ``"10MB"`` -> 10 000 000; ``"1KB"`` -> 1000; ``"500B"`` -> 500
    (decimal units, a positive whole number)."""
    m = re.fullmatch(r"(\d+)\s*(B|KB|MB)", str(text).strip(), re.IGNORECASE)
    if not m or int(m.group(1)) == 0:
        raise UsageError(f"invalid size {text!r}: use a positive integer and B, KB or MB, "
                         "e.g. 10MB, 1KB, 500B")
    size = int(m.group(1)) * SIMPLEPERF_UNITS[m.group(2).upper()]
    if size > SIZE_MAX_BYTES:
        raise UsageError(f"invalid size {text!r}: more than 1 TiB", hint="e.g. 10MB, 1KB")
    return size


def interval_ns(interval: float) -> int:
    """Seconds -> nanoseconds of a whole number of microseconds, as tshark's io,stat rounds it."""
    seconds = check_interval(interval, "interval")
    us = int(seconds * 1e6 + 0.5)
    if us < 1:
        raise UsageError(f"interval {interval} s is below 1 microsecond, the finest tshark and "
                         "pcapstats count in", hint="use 0.000001 or more")
    return us * 1000


# -- The limits of every option, by kind --------------------------------------------------------
#
# One validator a kind of value -- an interval, a duration, a rate, a size, a count, a
# percentage -- that every command (pcapstats.cli.checks) and every scenario field (the lab)
# goes through: the same limits and the same one-line refusal, naming the option as given.

DAY_S = 86400.0               # the longest duration or interval: a day, what a person means
INTERVAL_MIN_S = 1e-6         # the finest interval: tshark and pcapstats count whole microseconds
RATE_MAX_BPS = 1e12           # 1 Tbit/s: faster than any link pcapstats shapes or measures
SIZE_MAX_BYTES = 1 << 40      # 1 TiB
COUNT_MAX = 1 << 31           # a count or an index: what a 32-bit field holds

# The range of each whole-number quantity more than one command (or a lab spec) takes.
LIMITS = {
    "jobs": (1, 256),                  # worker processes
    "port": (0, 65535),
    "parallel": (1, 128),              # connections a pair (iperf3's most; simpleperf: 5)
    "pairs": (1, 8),                   # sender/receiver pairs in the lab
    "hops": (1, 8),                    # routers on a lab chain
    "trials": (1, 1000),
    "ping_count": (1, 1_000_000),
    "seed": (0, (1 << 32) - 1),
    "snaplen": (64, 262144),           # tcpdump's most; the headers pcapstats reads
    "buffer": (1, (1 << 31) - 1),      # a socket buffer: the kernel's int
    "message": (1, 1 << 31),           # an application message, bytes
    "ping_size": (0, 65507),           # ping -s: an ICMP echo's payload in one IPv4 packet
}


def _refuse(option: str, value, why: str, hint: str | None = None) -> UsageError:
    """``OPTION VALUE: why. Hint`` (VALUE as typed, where the option says it: "rate '2tbit'")."""
    if "'" in option or '"' in option:
        return UsageError(f"{option}: {why}", hint=hint)
    shown_value = f"{value:g}" if isinstance(value, float) else str(value)
    return UsageError(f"{option} {shown_value}: {why}", hint=hint)


def _seconds(value, option: str) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise _refuse(option, repr(value), "not a number of seconds") from None
    if math.isnan(seconds) or isinstance(value, bool):
        raise _refuse(option, value, "not a number of seconds")
    return seconds


def check_interval(value, option: str = "interval") -> float:
    """An interval in seconds (bins, samples, pings): finite, from 1 microsecond to a day."""
    seconds = _seconds(value, option)
    if not math.isfinite(seconds) or seconds <= 0:
        raise _refuse(option, value, "an interval is a positive number of seconds",
                      "for example 1, 0.1 or 0.001")
    if seconds > DAY_S:
        raise _refuse(option, value, f"longer than a day ({DAY_S:g} s), the longest interval "
                      "pcapstats takes", "give seconds, e.g. 1 or 60")
    if seconds < INTERVAL_MIN_S * (1 - 1e-9):
        raise _refuse(option, value, "below 1 microsecond, the finest pcapstats and tshark "
                      "count in", "use 0.000001 or more")
    return seconds


def check_duration(value, option: str = "duration", *, zero: bool = False) -> float:
    """A duration in seconds (a transfer, a capture, an idle gap, a delay): finite, from 1
    microsecond (``zero``: or 0) to a day."""
    seconds = _seconds(value, option)
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not zero):
        raise _refuse(option, value, f"a duration is a number of seconds "
                      f"{'of 0 or more' if zero else 'above 0'}", "for example 10 or 0.5")
    if 0 < seconds < INTERVAL_MIN_S * (1 - 1e-9):
        raise _refuse(option, value, "below 1 microsecond, the finest pcapstats counts in",
                      "for example 10 or 0.5")
    if seconds > DAY_S:
        raise _refuse(option, value, f"longer than a day ({DAY_S:g} s), the longest duration "
                      "pcapstats takes", "a run, a capture or a delay of a day at most")
    return seconds


def check_rate(bps: float, option: str = "rate") -> float:
    """A rate in bit/s: finite, above 0, at most RATE_MAX_BPS (1 Tbit/s)."""
    if math.isnan(bps) or bps <= 0:
        raise _refuse(option, bps, "not a rate above 0 bit/s", "for example 30mbit")
    if bps > RATE_MAX_BPS:
        raise _refuse(option, f"{bps:g} bit/s", "over 1 Tbit/s, the fastest rate pcapstats "
                      "takes", "for example 10gbit")
    return bps


def check_size(value, option: str = "size", *, low: int = 1,
               high: int = SIZE_MAX_BYTES) -> int:
    """A size in whole bytes, from ``low`` to ``high`` (default 1 TiB)."""
    return _whole(value, option, low, high, "bytes")


def check_count(value, option: str = "count", *, low: int = 0, high: int = COUNT_MAX) -> int:
    """A count or an index: a whole number from ``low`` to ``high`` (default 2^31)."""
    return _whole(value, option, low, high, "")


def check_limit(value, option: str, quantity: str) -> int:
    """A whole number in the range :data:`LIMITS` gives ``quantity`` (``"parallel"`` ...)."""
    low, high = LIMITS[quantity]
    unit = "bytes" if quantity in ("snaplen", "buffer", "message") else ""
    return _whole(value, option, low, high, unit)


def check_percentage(text: str, option: str = "loss") -> float:
    """A share of packets, "10%" or "0.1", as a fraction from 0 to 1 (parse_loss)."""
    try:
        return parse_loss(text)
    except UsageError as e:
        raise UsageError(f"{option}: {e.what}", hint=e.hint) from None


def _whole(value, option: str, low: int, high: int, unit: str) -> int:
    if isinstance(value, bool):
        raise _refuse(option, value, "not a whole number")
    if isinstance(value, float):
        if not value.is_integer():
            raise _refuse(option, value, "not a whole number")
        value = int(value)
    if not isinstance(value, int):
        try:
            value = int(str(value).strip())
        except ValueError:
            raise _refuse(option, repr(value), "not a whole number") from None
    if not low <= value <= high:
        said = f"{value:.3g}" if abs(value) >= 10**9 else str(value)
        raise _refuse(option, said, f"out of range, {low:,} to {high:,}"
                      f"{' ' + unit if unit else ''}", "give a whole number in that range")
    return value
