"""Start real nginx (forward-auth.conf) for tests and benchmarks; it also serves the job's app
(echoing who nginx says the user is) and a no-op auth server."""

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

CONF = Path(__file__).resolve().parent / "nginx" / "forward-auth.conf"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    def __init__(self, portal, *, cache=False, port=None):
        self.prefix = Path(tempfile.mkdtemp(prefix="nginx-"))
        # Started as root, nginx's workers run as an unprivileged user: let them write the
        # cache and temp folders.
        self.prefix.chmod(0o755)
        for name in ("authcache", "body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (self.prefix / name).mkdir(mode=0o777)
            (self.prefix / name).chmod(0o777)
        self.port = port or free_port()
        text = CONF.read_text()
        for key, value in {
            "LISTEN": f"127.0.0.1:{self.port}",
            "PORTAL": portal,
            "UPSTREAM": f"127.0.0.1:{free_port()}",
            "PREFIX": str(self.prefix),
            "CACHE": "0" if cache else "1",
            "NOOP": f"127.0.0.1:{free_port()}",
        }.items():
            text = text.replace("{{" + key + "}}", value)
        (self.prefix / "nginx.conf").write_text(text)
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        self.proc = subprocess.Popen(
            [binary, "-c", str(self.prefix / "nginx.conf"), "-p", str(self.prefix)], env=os.environ
        )
        deadline = time.monotonic() + 60  # generous: the machine may be busy
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    log = self.stop()  # never leave a half-started nginx behind
                    raise RuntimeError(log or "nginx did not start") from None
                time.sleep(0.05)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        text = (
            (self.prefix / "error.log").read_text() if (self.prefix / "error.log").exists() else ""
        )
        shutil.rmtree(self.prefix, ignore_errors=True)
        return text


def serve(portal, port):
    """Run nginx in the foreground in front of the portal (for `make run`)."""
    import signal
    import sys

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # so nginx is stopped with us
    proxy = Nginx(portal, port=port, cache=True)
    try:
        proxy.proc.wait()
    finally:
        proxy.stop()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="nginx with forward-auth in front of the portal")
    parser.add_argument("--portal", required=True, help="host:port of the portal")
    parser.add_argument("--port", type=int, required=True, help="port nginx listens on")
    args = parser.parse_args()
    serve(args.portal, args.port)
