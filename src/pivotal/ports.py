"""Listening on a port, for every listener Pivotal serves (``pivotal.cli.listeners``): a port
another process holds is one clear error naming the address and the option that picks
another, never a traceback from deep inside the server."""

from __future__ import annotations

import errno
import ipaddress
import re
import socket

from pivotal.errors import PivotalError


class PortInUse(PivotalError):
    """Another process already listens on this address and port."""

    code = "port_in_use"


class CannotListen(PivotalError):
    """The system refused to listen on this address and port."""

    code = "cannot_listen"


_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def address_error(host: str) -> str | None:
    """Why ``host`` cannot be an address to listen on, or None: an IPv4 or IPv6 address,
    or a host name (labels of letters, digits and inner hyphens). Dotted digits that are no
    IPv4 address (``999.1.1.1``) are refused, not looked up as a name."""
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    if ":" in host or re.fullmatch(r"[0-9.]+", host):
        return f"{host!r} is not an IP address"
    labels = host.removesuffix(".").split(".")
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        return f"{host!r} is neither an IP address nor a host name"
    return None


def bind(host: str, port: int, *, option: str = "--port") -> socket.socket:
    """A listening socket on ``host:port``, for the listener that serves there. A port
    another process holds is ``PortInUse`` (naming ``option``, the way to choose another);
    any other refusal (an address this machine does not have, a port it may not use) is
    ``CannotListen``."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    where = f"[{host}]:{port}" if family == socket.AF_INET6 else f"{host}:{port}"
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        raise CannotListen(f"cannot listen on {where}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(
                f"{where} is in use by another process: choose another {option}, "
                "or stop what listens there"
            ) from None
        raise CannotListen(f"cannot listen on {where}: {exc.strerror or exc}") from None
    except BaseException:
        sock.close()
        raise
    sock.setblocking(False)
    return sock
