"""The test bed's container runtime and Multus, for secondary networks only. Test-bed code, not
product code: on a real cluster the kubelet, the container runtime and Multus do this.

    runner.py --kubeconfig K --cni-path DIR --state-dir DIR [--workers 8]

Watches every pod. When a pod that selects networks (annotation `k8s.v1.cni.cncf.io/networks`)
is bound to a node (`spec.nodeName` set, by a test or by the real scheduler), it calls the IPAM
plugin of each selected NetworkAttachmentDefinition, the real binary from CNI_PATH (whereabouts,
static), with CNI_COMMAND=ADD, the NAD's config on stdin (for static IPAM, the selection's `ips`
as the `ips` runtime capability, as Multus passes them) and interface names net1, net2... as the
selection says. Then it writes `k8s.v1.cni.cncf.io/network-status` on the pod as Multus does.
The main plugins (ipvlan, macvlan) are not run: the host interfaces they name do not exist here,
and addresses are all the portal reads.

A failed ADD is undone (DEL of the interfaces already set up, as the kubelet tears down a failed
sandbox), recorded as a Warning Event `FailedCreatePodSandBox` on the pod (the kubelet's reason and
message shape), and retried with backoff like the kubelet's sandbox retries. When a pod is deleted
(or marked for deletion) it calls DEL for each interface it added.

The sandbox is the pod: its UID is the CNI container id. All pods share one network namespace
this runner creates (the plugins require CNI_NETNS and ignore it for IPAM); it is removed on exit.
"""

import argparse
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from k8s_adapters.client import Cluster  # noqa: E402
from k8s_adapters.errors import K8sError  # noqa: E402

NETWORKS = "k8s.v1.cni.cncf.io/networks"
NETWORK_STATUS = "k8s.v1.cni.cncf.io/network-status"
NAD_API = "k8s.cni.cncf.io/v1"
SANDBOX_FAILED = "FailedCreatePodSandBox"
# Tests mark a pod whose node is lost with its runtime: deleting it never calls DEL, so its
# addresses stay allocated (the leak Whereabouts users know from node crashes).
SKIP_DEL = "gpu-portal.test/skip-cni-del"
FIELD_MANAGER = "gpu-portal-cni-runner"
PLUGIN_TIMEOUT = 120  # seconds; Whereabouts waits for its lease under load
BACKOFF_FIRST, BACKOFF_MAX = 2.0, 60.0
SHUTDOWN_GRACE = 10  # seconds for plugin calls in flight to finish on SIGTERM

log = logging.getLogger("cni-runner")


class PluginError(Exception):
    """An IPAM plugin refused ADD (its CNI error message) or a NAD could not be used."""


@dataclass(frozen=True)
class Attachment:
    """One interface of a pod: what to send the IPAM plugin for ADD and, later, DEL."""

    network: str  # "<namespace>/<nad name>"
    ifname: str
    plugin: str  # the IPAM plugin's type, a binary in CNI_PATH
    stdin: bytes


# -- pure helpers -----------------------------------------------------------------------------


def parse_selection(text: str, namespace: str) -> list[dict]:
    """The networks annotation, JSON list or comma text `[ns/]name[@ifname]`, as
    [{namespace, name, interface, ips}] with interfaces net1, net2... where none is given."""
    text = text.strip()
    if text.startswith("["):
        entries = json.loads(text)
    else:
        entries = []
        for item in filter(None, (part.strip() for part in text.split(","))):
            name, _, ifname = item.partition("@")
            ns, _, name = name.rpartition("/")
            entries.append({"namespace": ns or namespace, "name": name, "interface": ifname})
    return [
        {
            "namespace": entry.get("namespace") or namespace,
            "name": entry["name"],
            "interface": entry.get("interface") or f"net{i + 1}",
            "ips": list(entry.get("ips") or []),
        }
        for i, entry in enumerate(entries)
    ]


def ipam_configs(nad_config: dict, selection: dict) -> list[dict]:
    """The stdin of each IPAM call for one NAD: each plugin (of a single config or a conflist)
    that has an `ipam` block, with the list's name and cniVersion, and runtimeConfig for the
    capabilities it declares, as libcni builds it."""
    plugins = nad_config.get("plugins") or [nad_config]
    configs = []
    for plugin in plugins:
        if not plugin.get("ipam"):
            continue
        config = {
            **plugin,
            "name": nad_config.get("name", ""),
            "cniVersion": nad_config.get("cniVersion", "0.3.1"),
        }
        if (plugin.get("capabilities") or {}).get("ips") and selection["ips"]:
            config["runtimeConfig"] = {"ips": selection["ips"]}
        configs.append(config)
    return configs


def plugin_ips(result: dict) -> list[str]:
    """Addresses (without prefix length) from a CNI result of any version."""
    if "ips" in result:
        return [entry["address"].split("/")[0] for entry in result["ips"]]
    return [result[family]["ip"].split("/")[0] for family in ("ip4", "ip6") if result.get(family)]


def plugin_error(stdout: bytes, stderr: bytes, code: int) -> str:
    """A plugin's CNI error ({code, msg, details} on stdout), or what it printed."""
    try:
        error = json.loads(stdout)
        return " ".join(filter(None, [error.get("msg"), error.get("details")]))
    except ValueError:
        return (stderr or stdout).decode(errors="replace").strip() or f"exit status {code}"


def bound(pod: dict) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


def deleting(pod: dict) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def annotations(pod: dict) -> dict:
    return pod["metadata"].get("annotations") or {}


# -- the runner -------------------------------------------------------------------------------


class Runner:
    def __init__(self, cluster: Cluster, cni_path: Path, state: Path, netns: str, workers: int):
        self.cluster, self.cni_path, self.state, self.netns = cluster, cni_path, state, netns
        self.pool = ThreadPoolExecutor(max_workers=workers)
        self.lock = threading.Lock()
        self.added: dict[str, list[Attachment]] = {}  # pod uid -> interfaces set up
        self.busy: set[str] = set()
        self.plugins: set[subprocess.Popen] = set()  # plugin calls in flight
        self.running = 0  # pods being handled by the pool's threads now
        self.stopping = threading.Event()  # no plugin starts once set
        self.retry: dict[str, tuple[float, float, dict]] = {}  # uid -> (due, backoff, pod)
        self.failures: dict[str, int] = {}
        self.known: dict[str, dict] = {}  # uid -> last seen pod
        self.whereabouts_conf = state / "whereabouts.conf"

    # -- plugin calls --

    def call(self, command: str, pod: dict, attachment: Attachment) -> dict:
        if self.stopping.is_set():
            raise PluginError("the runner is stopping")
        meta = pod["metadata"]
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": meta["uid"],
            "CNI_NETNS": self.netns,
            "CNI_IFNAME": attachment.ifname,
            "CNI_PATH": str(self.cni_path),
            "CNI_ARGS": (
                f"IgnoreUnknown=1;K8S_POD_NAMESPACE={meta['namespace']};"
                f"K8S_POD_NAME={meta['name']};K8S_POD_UID={meta['uid']}"
            ),
        }
        proc = subprocess.Popen(
            [str(self.cni_path / attachment.plugin)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        with self.lock:
            self.plugins.add(proc)
        try:
            stdout, stderr = proc.communicate(attachment.stdin, timeout=PLUGIN_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        finally:
            with self.lock:
                self.plugins.discard(proc)
        if proc.returncode != 0:
            raise PluginError(plugin_error(stdout, stderr, proc.returncode))
        return json.loads(stdout or b"{}")

    def stop(self, grace: float) -> bool:
        """Start no plugin and no pod from now on, let the pods being handled finish for
        `grace` seconds, then kill the plugins still running (with the API server gone,
        Whereabouts waits for its lease until its own timeout). Whether all finished in time."""
        self.stopping.set()
        self.pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            with self.lock:
                if not self.running:
                    return True
            time.sleep(0.1)
        killed: set[int] = set()
        for _ in range(50):  # a handler may be between two calls: kill until none is left
            with self.lock:
                stuck = list(self.plugins)
            for proc in stuck:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                killed.add(proc.pid)
            with self.lock:
                if not self.running:
                    break
            time.sleep(0.1)
        log.warning("stopped with pods still being handled: killed %d plugin call(s)", len(killed))
        return False

    def attachments(self, pod: dict) -> list[Attachment]:
        """What each selected network needs; PluginError when a NAD is missing or unusable."""
        meta = pod["metadata"]
        found = []
        for selection in parse_selection(annotations(pod)[NETWORKS], meta["namespace"]):
            nad = self.cluster.get(
                NAD_API, "NetworkAttachmentDefinition", selection["name"], selection["namespace"]
            )
            network = f"{selection['namespace']}/{selection['name']}"
            if nad is None:
                raise PluginError(f"cannot find a network-attachment-definition ({network})")
            for config in ipam_configs(json.loads(nad["spec"]["config"]), selection):
                if config["ipam"]["type"] == "whereabouts":
                    config["ipam"] = {
                        **config["ipam"],
                        "configuration_path": str(self.whereabouts_conf),
                    }
                found.append(
                    Attachment(
                        network,
                        selection["interface"],
                        config["ipam"]["type"],
                        json.dumps(config).encode(),
                    )
                )
        return found

    # -- pod lifecycle --

    def set_up(self, pod: dict) -> None:
        uid, done = pod["metadata"]["uid"], []
        statuses: dict[tuple[str, str], list[str]] = {}
        try:
            for attachment in self.attachments(pod):
                result = self.add(pod, attachment)
                done.append(attachment)
                key = (attachment.network, attachment.ifname)
                statuses.setdefault(key, []).extend(plugin_ips(result))
            self.write_status(pod, statuses)
        except (PluginError, K8sError, subprocess.TimeoutExpired, ValueError, KeyError) as exc:
            self.undo(pod, done)
            self.failed(pod, exc)
            return
        with self.lock:
            self.added[uid] = done
            self.retry.pop(uid, None)
        log.info("ADD %s: %s", ref(pod), statuses)

    def add(self, pod: dict, attachment: Attachment) -> dict:
        """ADD, its error worded as Multus words it: naming the network by its CNI config's
        `name` (not the NetworkAttachmentDefinition's)."""
        try:
            return self.call("ADD", pod, attachment)
        except PluginError as exc:
            name = json.loads(attachment.stdin).get("name", "")
            raise PluginError(
                f"[{ref(pod)}/{pod['metadata']['uid']}:{name}]: error adding container to "
                f'network "{name}": {exc}'
            ) from exc

    def undo(self, pod: dict, done: list[Attachment]) -> None:
        for attachment in reversed(done):
            with contextlib.suppress(PluginError, subprocess.TimeoutExpired):
                self.call("DEL", pod, attachment)

    def failed(self, pod: dict, exc: Exception) -> None:
        uid = pod["metadata"]["uid"]
        with self.lock:
            _, backoff, _ = self.retry.get(uid, (0.0, BACKOFF_FIRST / 2, pod))
            backoff = min(backoff * 2, BACKOFF_MAX)
            self.retry[uid] = (time.monotonic() + backoff, backoff, pod)
            self.failures[uid] = self.failures.get(uid, 0) + 1
            count = self.failures[uid]
        message = (
            "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup "
            f'network for sandbox "{uid}": plugin type="multus" name="multus-cni-network" '
            f"failed (add): {exc}"
        )
        log.info("ADD %s failed (retry in %.0fs): %s", ref(pod), backoff, exc)
        with contextlib.suppress(K8sError):
            self.event(pod, message, count)

    def event(self, pod: dict, message: str, count: int) -> None:
        """One Warning Event per pod, its count raised on each failure (as the kubelet's event
        aggregation does)."""
        meta = pod["metadata"]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.cluster.apply_one(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {
                    "name": f"{meta['name']}.{meta['uid'][:8]}-sandbox",
                    "namespace": meta["namespace"],
                },
                "involvedObject": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "namespace": meta["namespace"],
                    "uid": meta["uid"],
                },
                "reason": SANDBOX_FAILED,
                "type": "Warning",
                "message": message,
                "count": count,
                "firstTimestamp": now if count == 1 else None,
                "lastTimestamp": now,
                "source": {"component": "kubelet", "host": pod["spec"].get("nodeName", "")},
            }
        )

    def write_status(self, pod: dict, statuses: dict[tuple[str, str], list[str]]) -> None:
        status = [
            {"name": network, "interface": ifname, "ips": ips, "dns": {}}
            for (network, ifname), ips in statuses.items()
        ]
        meta = pod["metadata"]
        self.cluster.patch_merge(
            "v1",
            "Pod",
            meta["name"],
            {"metadata": {"annotations": {NETWORK_STATUS: json.dumps(status, indent=4)}}},
            namespace=meta["namespace"],
        )

    def tear_down(self, pod: dict) -> None:
        uid = pod["metadata"]["uid"]
        with self.lock:
            done = self.added.pop(uid, None)
            self.retry.pop(uid, None)
            self.failures.pop(uid, None)
        if annotations(pod).get(SKIP_DEL) == "true":
            log.info("no DEL for %s: its node is gone with its runtime", ref(pod))
            return
        if done is None and NETWORK_STATUS in annotations(pod):
            # Set up before this runner started: rebuild the calls from the NADs, if still there.
            with contextlib.suppress(PluginError, K8sError, ValueError, KeyError):
                done = self.attachments(pod)
        for attachment in reversed(done or []):
            try:
                self.call("DEL", pod, attachment)
            except (PluginError, subprocess.TimeoutExpired) as exc:
                log.warning("DEL %s %s failed: %s", ref(pod), attachment.ifname, exc)
        if done:
            log.info("DEL %s", ref(pod))

    # -- dispatch --

    def submit(self, uid: str, work, pod: dict) -> None:
        with self.lock:
            if uid in self.busy:
                return
            self.busy.add(uid)

        def run():
            with self.lock:
                self.running += 1
            try:
                work(pod)
            except Exception:
                log.exception("handling %s", ref(pod))
            finally:
                with self.lock:
                    self.busy.discard(uid)
                    self.running -= 1
                if work == self.set_up and not self.stopping.is_set():  # it may have gone
                    self.recheck(uid)

        self.pool.submit(run)

    def recheck(self, uid: str) -> None:
        with self.lock:
            gone = uid not in self.known and uid in self.added
            pod = self.known.get(uid)
        if gone or (pod and deleting(pod)):
            self.submit(uid, self.tear_down, pod or {"metadata": {"uid": uid}})

    def on_pod(self, kind: str, pod: dict) -> None:
        uid = pod["metadata"]["uid"]
        if kind == "DELETED" or deleting(pod):
            with self.lock:
                self.known.pop(uid, None) if kind == "DELETED" else self.known.update({uid: pod})
                wanted = (
                    uid in self.added or uid in self.retry or NETWORK_STATUS in annotations(pod)
                )
            if wanted:
                self.submit(uid, self.tear_down, pod)
            return
        with self.lock:
            self.known[uid] = pod
            pending = (
                NETWORKS in annotations(pod)
                and bound(pod)
                and NETWORK_STATUS not in annotations(pod)
                and uid not in self.added
                and uid not in self.retry
            )
        if pending:
            self.submit(uid, self.set_up, pod)

    def retry_due(self) -> None:
        now = time.monotonic()
        with self.lock:
            due = [uid for uid, (at, _, _) in self.retry.items() if at <= now]
            for uid in due:
                _, backoff, pod = self.retry[uid]
                self.retry[uid] = (now + backoff, backoff, pod)  # not again while in flight
            latest = {uid: self.known[uid] for uid in due if uid in self.known}
        for uid, pod in latest.items():
            self.submit(uid, self.set_up, pod)

    def relist(self) -> str | None:
        pods, version = self.cluster.list_with_version("v1", "Pod")
        seen = {p["metadata"]["uid"] for p in pods}
        with self.lock:
            vanished = [
                self.known[uid] for uid in list(self.known) if uid not in seen and uid in self.added
            ]
            self.known = {uid: pod for uid, pod in self.known.items() if uid in seen}
        for pod in vanished:  # deleted while the watch was down
            self.on_pod("DELETED", pod)
        for pod in pods:
            self.on_pod("ADDED", pod)
        return version

    def run(self, stop: threading.Event) -> None:
        ticker = threading.Thread(target=self._tick, args=(stop,), daemon=True)
        ticker.start()
        backoff = 0.5
        while not stop.is_set():
            try:
                version = self.relist()
                log.info("runner ready: watching pods")
                backoff = 0.5
                while not stop.is_set():
                    for kind, pod in self.cluster.watch(
                        "v1", "Pod", resource_version=version, timeout=30
                    ):
                        version = pod["metadata"].get("resourceVersion") or version
                        if kind != "BOOKMARK":
                            self.on_pod(kind, pod)
            except Exception as exc:  # noqa: BLE001  (a 410 or a lost API server: relist)
                log.warning("watch ended (%s); relisting in %.1fs", exc, backoff)
                stop.wait(backoff)
                backoff = min(backoff * 2, 10)

    def _tick(self, stop: threading.Event) -> None:
        while not stop.wait(0.5):
            self.retry_due()


def ref(pod: dict) -> str:
    meta = pod["metadata"]
    return f"{meta.get('namespace', '')}/{meta.get('name', meta.get('uid'))}"


def write_whereabouts_conf(state: Path, kubeconfig: str, log_level: str) -> None:
    """Whereabouts' flat file: where its datastore is and where it logs."""
    (state / "whereabouts.conf").write_text(
        json.dumps(
            {
                "datastore": "kubernetes",
                "kubernetes": {"kubeconfig": kubeconfig},
                "log_file": str(state / "whereabouts.log"),
                "log_level": log_level,
            }
        )
    )


@contextlib.contextmanager
def network_namespace():
    """A network namespace of our own for CNI_NETNS (the plugins refuse their own)."""
    name = f"gpu-portal-cni-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield f"/run/netns/{name}"
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--cni-path", required=True, type=Path)
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--whereabouts-log-level", default="error")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    args.state_dir.mkdir(parents=True, exist_ok=True)
    write_whereabouts_conf(args.state_dir, args.kubeconfig, args.whereabouts_log_level)
    cluster = Cluster.connect(args.kubeconfig, field_manager=FIELD_MANAGER)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with network_namespace() as netns:
        runner = Runner(cluster, args.cni_path, args.state_dir, netns, args.workers)
        watcher = threading.Thread(target=runner.run, args=(stop,), daemon=True)
        watcher.start()
        while not stop.wait(1):
            pass
        finished = runner.stop(SHUTDOWN_GRACE)
    log.info("runner stopped")
    if not finished:  # a pod's work may still wait on the API server: do not wait for it
        logging.shutdown()
        os._exit(0)


if __name__ == "__main__":
    main()
