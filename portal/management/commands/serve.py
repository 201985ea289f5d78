"""Serve the portal over HTTP: granian (a Rust HTTP server) running the WSGI application.

One command for `make run`, the tests, the benchmarks and containers. Granian keeps the
router's forward-auth connections alive and parses HTTP outside Python: through Traefik it
answers about 1.7 times the forward-auth requests gunicorn did on the same two cores
(bench/bench_endpoints.py)."""

import os
import shutil
import sys

from django.core.management.base import BaseCommand, CommandError

from core.addresses import split_bind


class Command(BaseCommand):
    help = "Serve the portal (web pages, API and forward-auth) with granian."

    def add_arguments(self, parser):
        parser.add_argument(
            "--bind", default="127.0.0.1:8000", help="host:port; *:port for every address"
        )
        parser.add_argument("--workers", type=int, default=2, help="processes")
        parser.add_argument("--threads", type=int, default=4, help="blocking threads a process")
        parser.add_argument("--access-log", action="store_true")

    def handle(self, *args, bind, workers, threads, access_log, **options):
        try:
            host, port = split_bind(bind)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        granian = shutil.which("granian", path=os.path.dirname(sys.executable)) or "granian"
        argv = [granian, "--interface", "wsgi", "--host", host, "--port", str(port)]
        argv += ["--workers", str(workers), "--blocking-threads", str(threads)]
        argv += ["--no-ws", "--log-level", "warning"]
        if access_log:
            argv.append("--access-log")
        os.execvp(granian, [*argv, "portal.wsgi:application"])  # noqa: S606  (argv, no shell)
