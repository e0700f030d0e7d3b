"""How an address and port are written, everywhere pcapstats writes one: ``10.0.0.1:5000``,
``[2001:db8::1]:5000`` (RFC 3986's brackets for IPv6), and which socket family an address
needs.  At the bottom of the package so that the tools run inside lab hosts share it with the
analyses."""

from __future__ import annotations

import ipaddress
import socket


def endpoint(address, port) -> str:
    """address:port as people write it, an IPv6 address in brackets."""
    address = str(address)
    return f"[{address}]:{int(port)}" if ":" in address else f"{address}:{int(port)}"


def socket_endpoint(addr: tuple) -> str:
    """A socket's address tuple as :func:`endpoint` writes it, an IPv4-mapped IPv6 address
    (``::ffff:10.0.0.1``: an IPv4 peer of a dual-stack socket) shown as the IPv4 it is."""
    host, port = addr[0], addr[1]
    if host.startswith("::ffff:") and "." in host:
        host = host[7:]
    return endpoint(host, port)


def family(ip: str) -> int:
    """The socket family ``ip`` (an IPv4 or IPv6 address as text) needs."""
    return socket.AF_INET6 if ipaddress.ip_address(ip).version == 6 else socket.AF_INET
