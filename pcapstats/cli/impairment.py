"""The five impairment options -- ``--loss``, ``--delay``, ``--jitter``, ``--rate``, ``--queue`` --
declared once for ``lab run``, ``capture`` and ``netem``: one spelling, one unit text, one
example each; the command says where they apply (``where``).  Their values are parsed by
:meth:`pcapstats.lab.impair.Impairment.from_text` (tc's units).
"""

from __future__ import annotations

from typing import Optional

import typer

NAMES = ("loss", "delay", "jitter", "rate", "queue")


def loss(where: str):
    return typer.Option(None, "--loss", show_default=False,
                        help=f"Random loss {where}, e.g. 10% (or 0.1).")


def delay(where: str):
    return typer.Option(None, "--delay", show_default=False,
                        help=f"One-way delay {where}, e.g. 20ms.")


def jitter(where: str):
    return typer.Option(None, "--jitter", show_default=False,
                        help=f"Delay jitter {where}, at most the delay, e.g. 2ms.")


def rate(where: str):
    return typer.Option(None, "--rate", show_default=False,
                        help=f"Rate {where}, e.g. 30mbit (mbit: bits/s; mbps: BYTES/s).")


def queue(where: str):
    return typer.Option(None, "--queue", show_default=False,
                        help=f"Queue of the rate limit {where}: bytes, kb, mb, or full frames as "
                        "e.g. 100p.")


def given(**values: Optional[str]) -> dict[str, str]:
    """The options given (by NAMES), as ``Impairment.from_text`` takes them."""
    return {k: v for k, v in values.items() if k in NAMES and v}
