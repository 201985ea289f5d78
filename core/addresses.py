"""Where a server listens: `host:port` as the portal's commands take it."""

import socket

EVERY = "*"  # every address of the host (a pod's, in a container), of each family it has


def every_address() -> str:
    """`::` where the host has IPv6: with the kernel's default (net.ipv6.bindv6only off) it
    takes IPv4 connections too, so one socket serves IPv4, IPv6 and dual-stack clusters alike.
    `0.0.0.0` where IPv6 is off (a kernel booted without it), where `::` cannot be bound."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::", 0))
    except OSError:
        return "0.0.0.0"  # noqa: S104  (every address is what was asked for)
    return "::"


def split_bind(bind: str) -> tuple[str, int]:
    """(host, port) of `host:port`, `[v6]:port` or `*:port` (every address, see
    `every_address`). ValueError says what is wrong."""
    host, _, port = bind.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(
            f"--bind takes host:port ([::1]:8000 for IPv6, *:8000 for every address), not {bind!r}"
        )
    host = host.strip("[]")
    return (every_address() if host == EVERY else host), int(port)
