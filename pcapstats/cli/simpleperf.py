"""`pcapstats simpleperf`: the simpleperf tool (pcapstats.tools.simpleperf), its own flags unchanged.

The arguments go untouched to simpleperf's argparse ``main`` (``-h`` included), so
``pcapstats simpleperf -c -I 10.0.0.2 -t 10`` and ``python3 -m pcapstats.tools.simpleperf -c -I
10.0.0.2 -t 10`` are the same program with the same errors (``simpleperf: error: ...``).
"""

from __future__ import annotations

import typer

from .app import app


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
             add_help_option=False)
def simpleperf(ctx: typer.Context):
    """The course's iperf-like TCP tool (-s server, -c client; -h)."""
    from ..tools.simpleperf import main  # lazy: 0.01 s of every other command's start-up
    raise typer.Exit(main(list(ctx.args), prog="pcapstats simpleperf"))
