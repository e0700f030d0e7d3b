"""Command-line pieces the lab's tools share: a parser whose errors are one line, and the
argument types they take alike (port, IP address, congestion control name, a count)."""

from __future__ import annotations

import argparse
import ipaddress
import re


def one_line_parser(error: type[Exception]) -> type[argparse.ArgumentParser]:
    """An ArgumentParser class that raises ``error(message)`` instead of printing usage and
    exiting: the tool prints it as its one error line."""
    class Parser(argparse.ArgumentParser):
        def error(self, message):
            raise error(message)
    return Parser


def port(text: str) -> int:
    if not re.fullmatch(r"\d+", text) or not 1024 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"invalid port {text!r}: must be an integer in "
                                         "1024-65535")
    return int(text)


def ip_address(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid IP address {text!r}: use dotted decimal like 10.0.0.2 (or an IPv6 "
            "address)") from None


def cc_name(text: str) -> str:
    if not re.fullmatch(r"[a-z0-9_]{1,15}", text):
        raise argparse.ArgumentTypeError(f"invalid congestion control {text!r}: e.g. reno, "
                                         "cubic, bbr")
    return text


def count(what: str, most: int):
    """The argument type of a whole number from 1 to ``most``; ``what`` names it in the error
    (``number of connections``)."""
    def parse(text: str) -> int:
        if not re.fullmatch(r"\d+", text) or not 1 <= int(text) <= most:
            raise argparse.ArgumentTypeError(f"invalid {what} {text!r}: must be 1 to {most}")
        return int(text)
    return parse
