"""`pcapstats pingpong`: the pingpong latency tool (pcapstats.tools.pingpong), flags unchanged.

The arguments go untouched to pingpong's argparse ``main`` (``-h`` included), so
``pcapstats pingpong -c 10.0.0.2 --sizes 18,1KiB`` and ``python3 -m pcapstats.tools.pingpong -c
10.0.0.2 --sizes 18,1KiB`` are the same program with the same errors (``pingpong: error: ...``).
"""

from __future__ import annotations

import typer

from .app import app


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
             add_help_option=False)
def pingpong(ctx: typer.Context):
    """Request/answer latency per message size, TCP or UDP (-s server, -c SERVER client; -h)."""
    from ..tools.pingpong import main  # lazy: 0.01 s of every other command's start-up
    raise typer.Exit(main(list(ctx.args), prog="pcapstats pingpong"))
