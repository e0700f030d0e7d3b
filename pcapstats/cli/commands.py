"""Which module defines each `pcapstats` command, so that a run imports only its own.

Importing a command module registers its commands on :data:`pcapstats.cli.app.app`.  All of
them, and typer turning all of them into click commands, cost every run ~35 ms; a run of one
command needs one module.  :func:`load` imports the module of the command named (``pcapstats
throughput ...``: ``throughput.py`` alone) and every module otherwise -- no command, a root
option first (``--help``, ``--version``), a name no module defines (click's "No such
command", with its "Did you mean") -- so ``pcapstats --help`` still lists every command, in
:data:`COMMANDS`' order (:func:`ordered`).

A new command is a row in :data:`COMMANDS` (tests/cli/test_startup.py checks the table
against what the modules register).
"""

from __future__ import annotations

# Every command, in the order `pcapstats --help` lists them (typer's: the commands in the
# order they registered, then the groups), and the module of pcapstats.cli defining it.
COMMANDS: dict[str, str] = {
    "throughput": "throughput", "columns": "throughput", "simpleperf": "simpleperf",
    "iograph": "iograph", "hierarchy": "hierarchy", "verify": "verify", "retrans": "tcp",
    "cwnd": "tcp", "limits": "tcp", "wscale": "tcp", "rtt": "tcp", "seqgraph": "tcp",
    "flavour": "flavour", "ping": "ping", "udp": "udp", "fairness": "fairness",
    "delay": "delay", "pingpong": "pingpong", "capture": "capture", "netem": "netem",
    "compare": "compare", "report": "report", "export": "export", "wifi": "wifi",
    "lab": "lab",                                    # a group: lab run, lab matrix, ...
}


def asked(argv: list[str]) -> str | None:
    """The command a command line names: its first word, when that is one of
    :data:`COMMANDS` (the root takes options alone, and only flags: --help, --version)."""
    return argv[0] if argv and argv[0] in COMMANDS else None


def load(command: str | None = None) -> None:
    """Import the module defining ``command`` (its commands register on the app), or every
    command module when ``command`` is None."""
    modules = [COMMANDS[command]] if command else list(dict.fromkeys(COMMANDS.values()))
    for module in modules:
        __import__(f"{__package__}.{module}")     # as `import` does: -X importtime shows it


def ordered(commands: dict) -> dict:
    """A click group's commands (name: command) in :data:`COMMANDS`' order, whatever order
    their modules were imported in (a process that ran one command, then asked for help)."""
    place = {name: i for i, name in enumerate(COMMANDS)}
    return dict(sorted(commands.items(), key=lambda item: place.get(item[0], len(place))))
