"""Where a server listens: `host:port` as the portal's commands take it."""

import socket

EVERY = "*"  # every address of the host (a pod's, in a container), of each family it has


def every_address() -> str:
    """`::` where the host has IPv6 and a socket bound to it takes IPv4 connections too (the
    kernel's default, net.ipv6.bindv6only off): one socket then serves IPv4, IPv6-only and
    dual-stack clusters alike. Else `0.0.0.0`: IPv6 off (a kernel booted without it), or an
    IPv6 socket that would take IPv6 alone and leave IPv4 clients unanswered."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            if probe.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY):
                return "0.0.0.0"  # noqa: S104  (every address is what was asked for)
            probe.bind(("::", 0))
    except OSError:
        return "0.0.0.0"  # noqa: S104
    return "::"


def split_bind(bind: str) -> tuple[str, int]:
    """(host, port) of `host:port`, `[v6]:port` or `*:port` (every address, see
    `every_address`). ValueError says what is wrong."""
    host, _, port = bind.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(
            f"--bind takes host:port ([::1]:8000 for IPv6, *:8000 for every address), not {bind!r}"
        )
    return listen_host(host), int(port)


def listen_host(host: str) -> str:
    """The address to bind for `host`: `*` is every address (`every_address`), `[v6]` the
    address within the brackets."""
    return every_address() if host == EVERY else host.strip("[]")
