"""Serve this pod's Prometheus metrics on a port of their own (METRICS_PORT), apart from the
portal's pages: no Service or route exposes it, so only what can reach the pod (Prometheus
inside the cluster) reads it. Samples of every process in the pod come from
PROMETHEUS_MULTIPROC_DIR; `--live` adds the values read at scrape time (queue depths, admission
queue, collector lag), which one component (web) publishes."""

import os
import threading

from django.conf import settings
from django.core.management.base import BaseCommand
from prometheus_client import CollectorRegistry, multiprocess, start_http_server

from core.addresses import EVERY, listen_host


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=settings.METRICS_PORT)
        # Every address of the pod, IPv6 too where it has it: its own port.
        parser.add_argument("--bind", default=EVERY, help="an address, or * for every address")
        parser.add_argument("--live", action="store_true", help="add the scrape-time values")

    def handle(self, *args, port, bind, live, **options):
        registry = CollectorRegistry()
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            multiprocess.MultiProcessCollector(registry)
        if live:
            from portal.metrics import LiveCollector

            registry.register(LiveCollector())
        bind = listen_host(bind)
        start_http_server(port, addr=bind, registry=registry)
        self.stdout.write(f"metrics on {bind}:{port}", ending="\n")
        self.stdout.flush()
        threading.Event().wait()
