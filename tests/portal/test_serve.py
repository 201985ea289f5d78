"""Where the portal's servers listen: in a pod, every address it has, IPv6 too (an IPv6-only or
dual-stack cluster's probes and Services reach the pod over IPv6)."""

import errno
import socket
import sys

import pytest
import requests
from django.core.management import CommandError, call_command

from core import addresses
from tests import processes


def _port_free_on_both_families():
    """A port free on every family the servers will listen on (IPv4 alone on a host without
    IPv6, or where an IPv6 socket takes IPv6 alone)."""
    dual = addresses.every_address() == "::"
    with socket.socket(socket.AF_INET6 if dual else socket.AF_INET) as s:
        s.bind(("::" if dual else "127.0.0.1", 0))  # dual-stack: free for IPv4 too
        return s.getsockname()[1]


def _answers(url):
    try:
        return requests.get(url, timeout=5).status_code == 200
    except requests.RequestException:
        return False


def _loopbacks():
    """The loopback addresses of the families this host has: IPv6 only where it has it."""
    return ["127.0.0.1"] + (["[::1]"] if addresses.every_address() == "::" else [])


@pytest.mark.parametrize(
    ("command", "path"),
    [
        (["serve", "--bind", "*:{port}", "--workers", "1"], "/healthz"),  # the image's web
        (["metrics_exporter", "--port", "{port}"], "/metrics"),  # its default bind
    ],
    ids=["web server", "metrics exporter"],
)
def test_a_server_on_every_address_answers_over_each_family(tmp_path, command, path):
    port = _port_free_on_both_families()
    args = [sys.executable, "manage.py", *(arg.format(port=port) for arg in command)]
    with processes.running(
        args,
        log=tmp_path / "server.log",
        ready=lambda: _answers(f"http://127.0.0.1:{port}{path}"),
        what=command[0],
    ):
        answered = {host: _answers(f"http://{host}:{port}{path}") for host in _loopbacks()}
    assert answered == dict.fromkeys(_loopbacks(), True)


def test_every_address_is_ipv4_on_a_host_without_ipv6(monkeypatch):
    real = socket.socket

    def no_ipv6(family=socket.AF_INET, *args, **kwargs):
        if family == socket.AF_INET6:
            raise OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol")
        return real(family, *args, **kwargs)

    monkeypatch.setattr(addresses.socket, "socket", no_ipv6)
    assert addresses.every_address() == "0.0.0.0"  # noqa: S104
    assert addresses.split_bind("*:8000") == ("0.0.0.0", 8000)  # noqa: S104


def test_every_address_is_ipv4_where_an_ipv6_socket_would_take_ipv6_alone(monkeypatch):
    """net.ipv6.bindv6only on: `::` would leave IPv4 clients (probes, Services) unanswered."""
    real = socket.socket

    class V6Only(real):
        def getsockopt(self, level, option, *args):
            if (level, option) == (socket.IPPROTO_IPV6, socket.IPV6_V6ONLY):
                return 1
            return super().getsockopt(level, option, *args)

    monkeypatch.setattr(addresses.socket, "socket", V6Only)
    assert addresses.every_address() == "0.0.0.0"  # noqa: S104


@pytest.mark.parametrize(
    ("bind", "split"),
    [("127.0.0.1:8000", ("127.0.0.1", 8000)), ("[::1]:9000", ("::1", 9000))],
)
def test_a_bind_names_a_host_and_a_port(bind, split):
    assert addresses.split_bind(bind) == split


@pytest.mark.parametrize("bind", ["8000", "127.0.0.1", "127.0.0.1:http", ":8000", "*:70000"])
def test_a_bind_without_a_host_and_port_is_refused_saying_how_to_write_one(bind):
    with pytest.raises(CommandError, match=r"--bind takes host:port .*\*:8000 for every address"):
        call_command("serve", bind=bind)
