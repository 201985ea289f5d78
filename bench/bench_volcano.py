"""Time to Running through the portal against the same jobs created directly through the API
server, on the real Volcano and 100 simulated 8-GPU KWOK nodes, in the same run; and how fast a
backlog of short jobs drains through the portal's admission queue and Volcano, against the same
backlog handed to Volcano directly.

- portal: 200 launch-form POSTs to the portal (granian, two Celery workers, the collector's watch
  on Volcano jobs, beat's resyncs as deployed, BENCH_BEAT=0 to leave them out), each followed by
  the job page it redirects to, as a browser does (the page shows the launch's message, so
  messages never pile up in the session's cookie); a job counts as Running when the portal says
  so (its `started_at`).
- direct: the same manifests (workspace PVC and Volcano job, as the portal builds them) applied
  by a script; a job counts as Running when Volcano says so (the Volcano job's phase).

Three times (BENCH_RUNS picks some of paced, steady, burst): one after another (the script
creates a job once the previous one's claim is bound; the portal's POSTs replay the script's
pace), one after another at a pace with CPU to spare (Poisson arrivals, BENCH_STEADY_PACE jobs
a second, default 1: on a small machine the script's own pace keeps the CPUs nearly saturated
with the direct run alone, and any added work then queues behind it), and all at once (the
script creates every claim, then each Volcano job as its claim binds; the portal takes 200
POSTs back to back). Each line says how busy the machine's CPUs were, and the CPU each part of
the test bed (the portal's processes, the database, the API server, Volcano...) spent a job.

The steady comparison runs BENCH_ROUNDS times (default 2), the script and the portal in turn,
each round reported, then all rounds together: the load of a shared machine drifts over minutes,
and one round's p99 (its third-slowest job) moves by more than the target. Both sides of a round
take the same arrivals (a seed per round), each job launched at its arrival whatever the ones
before it are doing (the script in a thread per job, the portal's POSTs from browsers of their
own). Rounds take turns at which side goes first, and every run starts once the last run's
objects, rows and queued tasks are gone and the machine is back at rest: otherwise the portal
always ran in the wake of the script's run. Each comparison says what the portal adds with a 95%
bootstrap interval (over the rounds, then their jobs, where rounds are pooled), and the rounds
pooled say whether going first or second moved it. BENCH_PERIODS (say
`1s,200ms`) runs it at each of Volcano's scheduling periods in turn, restarting the test bed's
scheduler: the time to Running moves with the period, the portal's own part does not.

Each job asks for 4 GPUs on one pod, so all 200 fit at once (2 per node). Target: the portal
adds at most 10% at p50 and at p99.

Drain: DRAIN_JOBS (default 1,000; BENCH_DRAIN_JOBS) jobs of 8 GPUs that run 2 s, on the full
100 nodes: 100 run at a time. Through the portal, jobs beyond the tenant's quota (the cluster)
wait in the portal's queue and are submitted as others finish; directly, Volcano queues them
all. Reported: total drain time, per job the wait in the portal's queue and Volcano's, and for
how long the portal's queue held jobs while Volcano had none waiting (the only time its
admission can hold the drain back). BENCH_STEADY_TIMELINE names a folder for each steady
run's times per job (a file a run). BENCH_DRAIN_TIMELINE names a file for each portal job's
times (launched, admitted, its Volcano job created, Running, Completed, finished in the portal).
"""

import concurrent.futures
import gc
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from queue import SimpleQueue

import requests
from bench_launch import login
from common import ROOT, Busy, percentile, setup_django, start, start_worker, stop

setup_django()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.utils import timezone  # noqa: E402

from core.cluster import get_cluster  # noqa: E402
from core.heap import freeze_loaded  # noqa: E402
from core.reconcile import nothing_waiting  # noqa: E402
from jobs import services as job_services  # noqa: E402
from jobs.models import Job, JobEvent  # noqa: E402
from k8s_adapters.errors import PermanentK8sError, TransientK8sError  # noqa: E402
from k8s_adapters.tenant import QUEUE_API  # noqa: E402
from k8s_adapters.volcano import VCJOB_API, build_job, read_job  # noqa: E402
from k8s_adapters.waiting import wait_bound  # noqa: E402
from tenants import services as tenant_services  # noqa: E402
from tenants.choices import Role  # noqa: E402
from tenants.models import AuditEvent, Membership  # noqa: E402
from tenants.tasks import reconcile_tenant  # noqa: E402

JOBS, NODES, PORT = 200, 100, 8766
BROWSERS = 16  # at most this many launches at once at given arrivals (a thread each)
DRAIN_JOBS = int(os.environ.get("BENCH_DRAIN_JOBS", "1000"))
# Jobs a second of the steady run (Poisson arrivals): one this machine sustains with room to
# spare, where the script's own pace keeps its CPUs nearly saturated with the direct run alone.
STEADY_PACE = float(os.environ.get("BENCH_STEADY_PACE", "1"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "2"))
# Scheduling periods to run the steady comparison at, one after another (the test bed's
# scheduler restarted at each, then at its own period again): empty, the period it runs at.
PERIODS = [p for p in os.environ.get("BENCH_PERIODS", "").split(",") if p]
# Which comparisons to run: paced (the script's pace), steady, burst (all at once).
RUNS = os.environ.get("BENCH_RUNS", "paced,steady,burst").split(",")
TIMELINE = os.environ.get("BENCH_DRAIN_TIMELINE", "")  # a file for the drain's per-job times
STEADY_TIMELINE = os.environ.get("BENCH_STEADY_TIMELINE", "")  # a folder, a file a run
# The portal as deployed runs beat: its resyncs (every job each RESYNC_INTERVAL, waiting ones
# each JOB_SYNC_INTERVAL) take the same CPUs and workers as the launches. BENCH_BEAT=0 leaves it
# out, to see what it costs.
BEAT = os.environ.get("BENCH_BEAT", "1") != "0"
PRODUCT = "BENCH-GPU-8"
SPEC = {
    "image": "registry.local/bench:1",
    "command": ["python", "train.py"],  # a simulated container with this runs until deleted
    "tasks": [
        {
            "name": "main",
            "replicas": 1,
            "gpus": 4,
            "cpu": "2",
            "memory": "8Gi",
            "gpu_product": PRODUCT,
        }
    ],
    "max_retry": 0,
    "plugins": ["env"],
    "volumes": {"workspace_gib": 1},
}


class Running(threading.Thread):
    """When each Volcano job of a namespace was first seen Running, and Completed (wall clock)."""

    def __init__(self, cluster, namespace):
        super().__init__(daemon=True)
        self.cluster, self.namespace, self.at, self.stop = cluster, namespace, {}, False
        self.done, self.relists = {}, 0

    def run(self):
        version = None
        while not self.stop:
            if version is None:  # first, and after the watch expired: what is there now
                jobs, version = self.cluster.list_with_version(
                    VCJOB_API, "Job", namespace=self.namespace
                )
                for obj in jobs:
                    self.saw(obj)
            try:
                for kind, obj in self.cluster.watch(
                    VCJOB_API, "Job", namespace=self.namespace, resource_version=version, timeout=5
                ):
                    version = obj["metadata"].get("resourceVersion", version)
                    if kind in ("ADDED", "MODIFIED"):
                        self.saw(obj)
            except PermanentK8sError as gone:  # 410 Gone: the version is too old; relist
                if gone.status != 410:
                    raise
                version = None
            except TransientK8sError as lost:  # a reset connection, a 429 or 5xx under load
                # Relisted, a job seen Running meanwhile is stamped late: said with the run.
                self.relists += 1
                print(f"(the watch of {self.namespace} was lost, relisting: {lost})", flush=True)
                time.sleep(0.2)
                version = None

    def finish(self):
        """Stop watching, and wait for the thread (its watch ends within its 5 s timeout)."""
        self.stop = True
        self.join(10)

    def saw(self, obj):
        phase = read_job(obj).phase
        if phase in ("Running", "Completed"):
            self.at.setdefault(obj["metadata"]["name"], time.time())
        if phase == "Completed":
            self.done.setdefault(obj["metadata"]["name"], time.time())

    def wait_all(self, names, timeout, done=False):
        seen = self.done if done else self.at
        deadline = time.monotonic() + timeout
        while not set(names) <= seen.keys():
            if time.monotonic() > deadline:
                missing = sorted(set(names) - seen.keys())
                sys.exit(f"{len(missing)} jobs never ran, e.g. {missing[:3]}")
            time.sleep(0.05)


def schedule_period():
    """How often the test bed's Volcano scheduler runs a session (its --schedule-period), or
    "unknown" on another cluster: the time to Running moves with it, and the portal's own part
    does not, so each comparison says which it ran at."""
    pid_file = ROOT / ".local" / "controlplane" / "volcano" / "vc-scheduler.pid"
    try:
        args = Path(f"/proc/{int(pid_file.read_text())}/cmdline").read_bytes().split(b"\0")
        return args[args.index(b"--schedule-period") + 1].decode()
    except (OSError, ValueError, IndexError):
        return "unknown"


def seed_nodes():
    subprocess.run(
        ["bash", "hack/volcano.sh", "seed", "--nodes", str(NODES), "--gpus", "8"]
        + ["--product", PRODUCT, "--prefix", "bench-gpu-", "--leaves", "10", "--spines", "2"],
        cwd=ROOT,
        check=True,
    )


def remove_nodes():
    cluster = get_cluster()
    for kind, api in (("HyperNode", "topology.volcano.sh/v1alpha1"), ("Node", "v1")):
        for obj in cluster.list(api, kind):
            if obj["metadata"]["name"].startswith("bench-gpu-"):
                cluster.delete(api, kind, obj["metadata"]["name"])


def make_tenant():
    admin, _ = get_user_model().objects.get_or_create(
        username="bench-admin", defaults={"is_staff": True}
    )
    user, _ = get_user_model().objects.get_or_create(username="bench-user")
    user.set_password("bench-password")
    user.save()
    tenant = tenant_services.create_tenant(
        actor=admin,
        slug=f"bench-{uuid.uuid4().hex[:6]}",
        display_name="Benchmark",
        gpu_quota=NODES * 8,
        cpu_quota=2 * JOBS,
        memory_quota_gib=8 * JOBS,
        max_running_jobs=max(JOBS, NODES),
        storage_quota_gib=2 * max(DRAIN_JOBS, JOBS),  # finished jobs keep their claims
        pvc_quota=2 * max(DRAIN_JOBS, JOBS),  # each run's claims are deleted after it
        pod_quota=2 * max(JOBS, NODES),  # the script's pods count too, until they stop
    )
    reconcile_tenant(tenant.pk)
    Membership.objects.create(tenant=tenant, user=user, role=Role.RESEARCHER)
    return tenant, user, admin


def portal_run(tenant, version, prefix, offsets=None, apart=False):
    """Form POSTs, at the given offsets from the first (one after another, each waiting for the
    last: the direct script's pace) or back to back; with `apart`, each at its offset from a
    browser of its own, whatever the POSTs before it are doing (as researchers launch). Per
    job, seconds from its POST to the portal's own start time, and that time in three parts:
    until the portal created its Volcano job (split at the job's queue time, taken in the web
    under the tenant's lock before admission), until Volcano said Running (a watch like the
    direct run's), and until the portal said so."""
    watcher = Running(get_cluster(), tenant.namespace)
    watcher.start()
    time.sleep(1)
    url = f"http://127.0.0.1:{PORT}/tenants/{tenant.slug}/jobs/launch/"
    browsers = SimpleQueue()
    signed_in = login(f"http://127.0.0.1:{PORT}")  # once: sign-ins are rate-limited
    for _ in range(BROWSERS if apart else 1):
        http = requests.Session()  # a tab of the signed-in browser: its cookies, its own socket
        http.cookies.update(signed_in.cookies)
        form = http.get(f"{url}?template={version.template.name}&version={version.version}")
        token = form.text.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
        browsers.put((http, token))
    posted = {}

    def post(name):
        http, token = browsers.get()
        try:
            posted[name] = time.time()
            response = http.post(
                url,
                data={
                    "csrfmiddlewaretoken": token,
                    "template": version.template.name,
                    "version": version.version,
                    "name": name,
                    "launch": "1",
                },
                headers={"Referer": url},
            )  # and the job page it redirects to, as a browser (which shows the launch's message)
        finally:
            browsers.put((http, token))
        assert [r.status_code for r in response.history] == [302], response.text[:500]
        assert response.url.endswith(f"/jobs/{name}/"), response.url  # not a sign-in page
        assert response.status_code == 200, response.text[:500]

    at_arrivals([f"{prefix}-{i:04d}" for i in range(JOBS)], offsets, post, apart)
    deadline = time.monotonic() + 600
    while Job.objects.filter(tenant=tenant, started_at__isnull=True).exists():
        if time.monotonic() > deadline:
            sys.exit("portal jobs never all ran")
        time.sleep(0.2)
    watcher.wait_all(posted, timeout=60)
    watcher.finish()
    rows = list(Job.objects.filter(tenant=tenant).values_list("name", "queued_at", "started_at"))
    saved = {name: queued.timestamp() for name, queued, _ in rows}
    started = {name: running.timestamp() for name, _, running in rows}
    submitted = submissions(tenant)
    late = later_submissions(tenant, submitted)
    if late:
        print(f"  ({len(late)} of {len(posted)} jobs were shown Pending before submission)")
    timeline(
        prefix,
        posted=posted,
        saved=saved,
        submitted=submitted,
        volcano_running=watcher.at,
        running=started,
    )
    parts = {
        "  until the portal submitted": [submitted[n] - posted[n] for n in posted],
        "    in the web, until queued": [saved[n] - posted[n] for n in posted],
        "    then until submitted": [submitted[n] - saved[n] for n in posted],
        "  then until Volcano's Running": [watcher.at[n] - submitted[n] for n in posted],
        "  then until the portal's": [started[n] - watcher.at[n] for n in posted],
    }
    return [started[n] - posted[n] for n in posted], parts


def submissions(tenant):
    """When the portal created each job's Volcano job (its "submitted" event), by job name."""
    events = JobEvent.objects.filter(job__tenant=tenant, kind="submitted")
    return {name: at.timestamp() for name, at in events.values_list("job__name", "created_at")}


def later_submissions(tenant, submitted):
    """The jobs shown Pending before their Volcano job was created: their launch's run found
    their claim unbound and did not wait for it (tasks waited for a worker), so the collector's
    watch on claims sent the run that submitted them. `submitted`: as `submissions` gives."""
    first_state = {}
    states = JobEvent.objects.filter(job__tenant=tenant, kind="state")
    for name, at in states.values_list("job__name", "created_at"):
        first_state[name] = min(first_state.get(name, at), at)
    return [n for n, at in first_state.items() if at.timestamp() < submitted.get(n, 0)]


def apply_retrying(cluster, objects):
    """Apply, again after a transient refusal (a 409 while the ResourceQuota admission races
    with its controller under load): what any client of the API server does."""
    for attempt in range(10):
        try:
            return cluster.apply(objects)
        except TransientK8sError:
            if attempt == 9:
                raise
            time.sleep(0.1 * (attempt + 1))
    return None


def apply_like_a_careful_script(cluster, objects):
    """The claim first, the Volcano job once it is bound: created together, Volcano's scheduler
    may never schedule the pod (volcano-sh/volcano#1983), as the portal found. The claim is
    watched from the version its apply returned, as the portal's worker watches it: the bind
    is seen the moment the API server records it (polling every 20 ms cost the script 10 ms
    a job, which the comparison credited to the portal)."""
    *volumes, vcjob = objects
    applied = apply_retrying(cluster, volumes)
    claims = [o for o in applied if o["kind"] == "PersistentVolumeClaim"]
    namespace, deadline = vcjob["metadata"]["namespace"], time.monotonic() + 60
    # A claim whose watch broke (a transient error) counts as unbound: it is read and waited
    # for again, until the deadline.
    while unbound := wait_bound(cluster, namespace, claims, deadline - time.monotonic()):
        if time.monotonic() > deadline:
            sys.exit(f"a claim of the direct run never bound: {unbound}")
        claims = [
            c for n in unbound if (c := cluster.get("v1", "PersistentVolumeClaim", n, namespace))
        ]
        time.sleep(0.05)
    apply_retrying(cluster, [vcjob])


def direct_run(tenant, user, prefix="d", arrivals=None):
    """The same objects the portal applies, applied by a script one job after another, each
    once the last is created (or each at its offset in `arrivals`, in a thread of its own,
    whatever the jobs before it are doing, as the portal takes each POST when it comes);
    Volcano's Running, and that time in two parts (before and after the script created the
    Volcano job). Also returns each job's offset from the first, to pace the portal's run
    alike."""
    cluster = get_cluster()
    names = [f"{prefix}-{i:04d}" for i in range(JOBS)]
    manifests = {  # made before the clock starts, as the portal's are not (its own part)
        name: build_job(job_services.resolve(tenant, user, name=name, data=SPEC)) for name in names
    }
    watcher = Running(cluster, tenant.namespace)
    watcher.start()
    time.sleep(1)
    applied, submitted = {}, {}

    def create(name):
        applied[name] = time.time()
        apply_like_a_careful_script(cluster, manifests[name])
        submitted[name] = time.time()

    at_arrivals(names, arrivals, create, apart=arrivals is not None)
    watcher.wait_all(applied, timeout=300)
    watcher.finish()
    timeline(prefix, applied=applied, submitted=submitted, volcano_running=watcher.at)
    first = min(applied.values())
    offsets = [applied[n] - first for n in sorted(applied)]
    parts = {
        "  until it submitted": [submitted[n] - applied[n] for n in applied],
        "  then until Volcano's Running": [watcher.at[n] - submitted[n] for n in applied],
    }
    return ([watcher.at[n] - applied[n] for n in applied], parts), offsets


def timeline(run, **times):
    """With BENCH_STEADY_TIMELINE, a run's times (epoch seconds) per job, by step, in a file of
    that folder named after the run: which jobs were slow, and in which step."""
    if STEADY_TIMELINE:
        Path(STEADY_TIMELINE).mkdir(parents=True, exist_ok=True)
        steps = {step: dict(at) for step, at in times.items()}
        (Path(STEADY_TIMELINE) / f"{run}.json").write_text(json.dumps(steps, indent=1))


def at_arrivals(names, offsets, start, apart):
    """`start(name)` for each name: at its offset (seconds from the first) in a thread of its
    own (`apart`), or one after another, each at its offset once the last returned (no
    offsets: back to back). An error in any is raised here."""
    first = time.time()
    if not apart:
        for i, name in enumerate(names):
            if offsets:
                time.sleep(max(0.0, first + offsets[i] - time.time()))
            start(name)
        return
    with concurrent.futures.ThreadPoolExecutor(max_workers=BROWSERS) as pool:
        started = []
        for i, name in enumerate(names):
            time.sleep(max(0.0, first + offsets[i] - time.time()))
            started.append(pool.submit(start, name))
        for done in started:
            done.result()


def poisson_arrivals(pace, seed=13):
    """JOBS offsets (seconds from the first) of a Poisson process of `pace` a second, the same
    for a given seed (both sides of a round get the same): jobs arriving in step with Volcano's
    one-second scheduling cycle would all wait the same part of it, differently for the script
    and for the portal."""
    rng, at, offsets = random.Random(seed), 0.0, []
    for _ in range(JOBS):
        offsets.append(at)
        at += rng.expovariate(pace)
    return offsets


def direct_burst(tenant, user, prefix="db", spec=SPEC, count=JOBS, done=False):
    """All at once, by a script: every claim first, then each Volcano job as soon as its claim
    is bound. Per job, seconds from its claim's creation to Running (or to Completed, `done`),
    and when the first claim was created."""
    cluster = get_cluster()
    watcher = Running(cluster, tenant.namespace)
    watcher.start()
    time.sleep(1)
    created, vcjobs = {}, {}
    for i in range(count):
        name = f"{prefix}-{i:04d}"
        *volumes, vcjob = build_job(job_services.resolve(tenant, user, name=name, data=spec))
        created[name] = time.time()
        apply_retrying(cluster, volumes)
        claim = next(o for o in volumes if o["kind"] == "PersistentVolumeClaim")
        vcjobs[claim["metadata"]["name"]] = vcjob
    deadline = time.monotonic() + 1800
    while vcjobs:
        if time.monotonic() > deadline:
            sys.exit(f"{len(vcjobs)} claims never bound")
        for claim in cluster.list("v1", "PersistentVolumeClaim", namespace=tenant.namespace):
            name = claim["metadata"]["name"]
            if name in vcjobs and (claim.get("status") or {}).get("phase") == "Bound":
                apply_retrying(cluster, [vcjobs.pop(name)])
        time.sleep(0.05)
    watcher.wait_all(created, timeout=3600, done=done)
    watcher.finish()
    return [watcher.at[n] - created[n] for n in created], watcher, min(created.values())


SHORT = {**SPEC, "command": ["sh", "-c", "sleep 2; exit 0"]}
SHORT = {**SHORT, "tasks": [{**SPEC["tasks"][0], "gpus": 8}]}


def drain_direct(tenant, user):
    """The backlog handed to Volcano at once (as fast as claims bind): it queues what does not
    fit."""
    waits, watcher, first = direct_burst(tenant, user, "dd", SHORT, DRAIN_JOBS, done=True)
    return max(watcher.done.values()) - first, waits


def drain_portal(tenant, user):
    """The backlog launched through the portal: beyond the quota it waits in the portal."""
    watcher = Running(get_cluster(), tenant.namespace)
    watcher.start()
    time.sleep(1)
    launched = {}
    for i in range(DRAIN_JOBS):
        name = f"dp-{i:04d}"
        launched[name] = time.time()
        job_services.launch_job(tenant, user, actor=user, spec_data=SHORT, name=name)
    deadline = time.monotonic() + 3600
    while Job.objects.filter(tenant=tenant, finished_at__isnull=True).exists():
        if time.monotonic() > deadline:
            sys.exit("the portal's backlog never drained")
        time.sleep(0.5)
    watcher.wait_all(launched, timeout=60, done=True)
    watcher.finish()
    rows = list(
        Job.objects.filter(tenant=tenant).values_list(
            "name", "submitted_at", "started_at", "finished_at"
        )
    )
    portal_wait = [r[1].timestamp() - launched[r[0]] for r in rows]
    volcano_wait = [r[2].timestamp() - r[1].timestamp() for r in rows if r[2]]
    drained = max(r[3].timestamp() for r in rows) - min(launched.values())
    created = submissions(tenant)
    if TIMELINE:  # per job, for a closer look: what the portal and Volcano did when
        with open(TIMELINE, "w") as out:
            json.dump(
                {
                    name: {
                        "launched": launched[name],
                        "admitted": admitted.timestamp(),
                        "created": created[name],
                        "running": watcher.at[name],
                        "completed": watcher.done[name],
                        "finished": finished.timestamp(),
                    }
                    for name, admitted, _, finished in rows
                },
                out,
            )
    return drained, portal_wait, volcano_wait, held_back(launched, created, watcher.at)


def held_back(launched, submitted, running):
    """Seconds during which the portal's queue held a job while Volcano had none waiting (none
    created and not yet Running): then, and only then, the portal's admission held the drain
    back; the rest of the time Volcano had jobs it had yet to start."""
    changes = []
    for name, at in launched.items():
        changes += [(at, 0, 1), (submitted[name], 0, -1)]
        changes += [(submitted[name], 1, 1), (running[name], 1, -1)]
    held = waiting = 0
    total, last = 0.0, None
    for at, queue, delta in sorted(changes):
        if last is not None and held and not waiting:
            total += at - last
        last = at
        if queue == 0:
            held += delta
        else:
            waiting += delta
    return total


def clear(tenant):
    """Remove every job of the tenant and wait until their pods, claims and volumes are gone:
    the next run starts on a quiet cluster (the PV binder busy releasing 200 volumes held the
    next run's claims back for seconds)."""
    cluster = get_cluster()
    for job in Job.objects.filter(tenant=tenant):
        job_services.delete_job(job, actor=job.owner)
    for vcjob in cluster.list(VCJOB_API, "Job", namespace=tenant.namespace):
        cluster.delete(VCJOB_API, "Job", vcjob["metadata"]["name"], tenant.namespace)
    for claim in cluster.list("v1", "PersistentVolumeClaim", namespace=tenant.namespace):
        cluster.delete("v1", "PersistentVolumeClaim", claim["metadata"]["name"], tenant.namespace)
    deadline = time.monotonic() + 300

    def volumes():
        return [
            v
            for v in cluster.list("v1", "PersistentVolume")
            if ((v.get("spec") or {}).get("claimRef") or {}).get("namespace") == tenant.namespace
        ]

    while (
        cluster.list("v1", "Pod", namespace=tenant.namespace)
        or cluster.list("v1", "PersistentVolumeClaim", namespace=tenant.namespace)
        or volumes()
        # The portal's own cleanup: its rows, and the deletions' runs (a next run's launches
        # would wait behind them in the queue, and a queue not empty stops a run waiting for
        # its claim to bind).
        or Job.objects.filter(tenant=tenant).exists()
        or not nothing_waiting()
    ):
        if time.monotonic() > deadline:
            sys.exit("pods, claims, volumes or jobs of the last run never went away")
        time.sleep(0.5)


def report(label, seconds):
    ms = sorted(s * 1000 for s in seconds)
    p50, p99 = percentile(ms, 50), percentile(ms, 99)
    print(f"{label:32s} p50 {p50:7.0f} ms   p99 {p99:7.0f} ms   max {ms[-1]:7.0f} ms")
    return p50, p99


def main():
    seed_nodes()
    # This process keeps the watches and the script's clock: a full collection of its loaded
    # modules (60-90 ms) stopped both, for either run, at random.
    freeze_loaded()
    tenant, user, admin = make_tenant()
    version = job_services.save_template(
        name=f"bench-{uuid.uuid4().hex[:4]}", spec_data=SPEC, overridable=[], actor=admin
    )
    web, _ = start(
        [sys.executable, "manage.py", "serve", "--bind", f"127.0.0.1:{PORT}", "--workers", "2"],
        "bench-web.log",
    )
    workers = [start_worker(f"bench-worker-{i}.log") for i in range(2)]
    collector, _ = start([sys.executable, "manage.py", "collect_cluster"], "bench-collector.log")
    schedule = tempfile.TemporaryDirectory()
    beat = []
    if BEAT:
        command = [sys.executable, "-m", "celery", "-A", "portal", "beat", "-l", "warning"]
        beat.append(start([*command, "-s", f"{schedule.name}/beat"], "bench-beat.log")[0])
    try:
        time.sleep(3)
        print(
            f"time to Running, {JOBS} jobs of 4 GPUs on {NODES} simulated 8-GPU nodes, Volcano "
            f"scheduling every {' and every '.join(PERIODS) or schedule_period()} "
            f"({timezone.now():%Y-%m-%d}), "
            + (
                f"beat resyncing every job each {settings.RESYNC_INTERVAL} s and waiting ones "
                f"each {settings.JOB_SYNC_INTERVAL} s:"
                if BEAT
                else "without beat:"
            ),
            flush=True,
        )
        if "paced" in RUNS:
            direct, portal, busy, offsets = paired_round(tenant, user, version)
            print(
                f"(the direct script's pace, which the portal's POSTs replayed: "
                f"{JOBS / offsets[-1]:.1f} jobs/s)",
                flush=True,
            )
            compare("one after another", direct, portal, busy)
        if "steady" in RUNS:
            own = schedule_period()
            try:
                for period in PERIODS or [own]:
                    if period != schedule_period():
                        restart_scheduler(period)
                    steady(tenant, user, version, f"at {period}, " if PERIODS else "")
            finally:
                if schedule_period() != own:
                    restart_scheduler(own)
        if "burst" in RUNS:
            settle()
            busy = Busy()
            burst, _, _ = direct_burst(tenant, user)
            direct_busy = busy.usage()
            clear(tenant)
            settle()
            busy = Busy()
            portal = portal_run(tenant, version, "pb")
            compare("all at once", (burst, {}), portal, (direct_busy, busy.usage()))
            clear(tenant)
        if DRAIN_JOBS:
            settle()
            drained = drain_direct(tenant, user)
            clear(tenant)
            settle()
            report_drain(drained, drain_portal(tenant, user))
    finally:
        try:
            clear(tenant)  # with the portal's workers still there to remove its jobs
        finally:
            stop(web, collector, *workers, *beat)
            schedule.cleanup()
            get_cluster().delete(QUEUE_API, "Queue", tenant.queue_name)
            get_cluster().delete("v1", "Namespace", tenant.namespace)
            Job.objects.filter(tenant=tenant).delete()
            AuditEvent.objects.filter(tenant=tenant).delete()
            version.template.delete()
            tenant.delete()
            remove_nodes()


def steady(tenant, user, version, prefix):
    label = f"{prefix}one after another, {STEADY_PACE:g} jobs/s on average (Poisson)"
    rounds, first = [], []
    for n in range(ROUNDS):
        portal_first = n % 2 == 1  # rounds take turns: the script first, then the portal
        arrivals = poisson_arrivals(STEADY_PACE, seed=13 + n)  # both sides of a round alike
        rounds.append(paired_round(tenant, user, version, arrivals, portal_first)[:3])
        first.append(portal_first)
        order = "the portal first" if portal_first else "the script first"
        suffix = f", round {n + 1} of {ROUNDS} ({order})" if ROUNDS > 1 else ""
        compare(label + suffix, *rounds[-1])
    if ROUNDS > 1:
        compare(f"{label}, all {ROUNDS} rounds together", *pooled(rounds), rounds=rounds)
        order_effect(rounds, first)


def order_effect(rounds, portal_first):
    """What the portal adds at p50 in rounds where it went first, against rounds where the
    script did: a clear gap says one run still leaves work behind for the next."""
    added = [percentile(r[1][0], 50) / percentile(r[0][0], 50) - 1 for r in rounds]
    by_order = {
        first: [a for a, f in zip(added, portal_first, strict=True) if f == first]
        for first in (False, True)
    }
    if by_order[False] and by_order[True]:
        mean = {k: sum(v) / len(v) for k, v in by_order.items()}
        print(
            f"  order: the portal adds {mean[False]:+.0%} at p50 going second, {mean[True]:+.0%} "
            "going first (rounds averaged)",
            flush=True,
        )


def restart_scheduler(period):
    if schedule_period() == "unknown":
        sys.exit("BENCH_PERIODS restarts the test bed's scheduler; none runs here")
    subprocess.run(
        ["bash", "hack/volcano.sh", "restart-scheduler"],
        cwd=ROOT,
        env={**os.environ, "VC_SCHEDULE_PERIOD": period},
        check=True,
    )


def paired_round(tenant, user, version, arrivals=None, portal_first=False):
    """The script, then the portal's POSTs: (direct, portal, CPUs busy in each, offsets). With
    `arrivals`, both at those offsets, each job apart (`at_arrivals`); without, the script one
    job after another at its own pace and the portal's POSTs replaying its offsets. With
    `portal_first` (arrivals only), the portal first: rounds that take turns going first leave
    neither side always running in the wake of the other. Each run starts on a settled machine
    (`settle`), and every run's jobs have names of their own."""
    tag = next(RUN_TAGS)

    def run_direct():
        settle()
        busy = Busy()
        direct, offsets = direct_run(tenant, user, f"d{tag}", arrivals)
        result = direct, busy.usage(), offsets
        clear(tenant)
        return result

    def run_portal(offsets):
        settle()
        busy = Busy()
        portal = portal_run(tenant, version, f"p{tag}", offsets, apart=arrivals is not None)
        result = portal, busy.usage()
        clear(tenant)
        return result

    if portal_first:
        assert arrivals, "the portal goes first only at given arrivals"
        portal, portal_busy = run_portal(arrivals)
        direct, direct_busy, offsets = run_direct()
    else:
        direct, direct_busy, offsets = run_direct()
        portal, portal_busy = run_portal(arrivals or offsets)
    return direct, portal, (direct_busy, portal_busy), offsets


RUN_TAGS = (f"r{n}" for n in itertools.count())  # job names: d<tag>-0001, p<tag>-0001
QUIET = {}  # by scheduling period: the least CPU use (cores) the test bed has shown at rest


def settle(window=2.0, most=90.0, margin=0.15):
    """Wait until the machine is back at rest: its CPUs (iowait counted as busy: etcd's
    compaction and the database's vacuum are disk work) within `margin` cores of the least the
    idle test bed has shown at this scheduling period, for two windows in a row; at most `most`
    seconds. `clear` already waited for the last run's objects, rows and queued tasks: this is
    for the work that outlasts them (the API server's garbage collection and events, Volcano's
    cache, the database's vacuum), with which the next run would share the CPUs. Also collects
    the last run's garbage in this process, which keeps the clocks and the watches."""
    gc.collect()
    gc.freeze()
    period = schedule_period()
    if period not in QUIET:
        time.sleep(10)
        QUIET[period] = min(_busy_cores(window) for _ in range(5))
        print(f"(at rest, the test bed keeps {QUIET[period]:.2f} cores busy)", flush=True)
    started, calm = time.monotonic(), 0
    while calm < 2:
        if time.monotonic() - started > most:
            print(f"(the machine did not settle within {most:.0f} s; the run starts all the same)")
            return
        busy = _busy_cores(window)
        QUIET[period] = min(QUIET[period], busy)
        calm = calm + 1 if busy <= QUIET[period] + margin else 0
    print(f"(settled in {time.monotonic() - started:.0f} s)", flush=True)


def _busy_cores(seconds):
    def read():
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
        return sum(fields), fields[3]  # all, idle (iowait counts as busy)

    total, idle = read()
    time.sleep(seconds)
    total2, idle2 = read()
    spent = total2 - total
    return (1 - (idle2 - idle) / spent) * os.cpu_count() if spent else 0.0


def pooled(rounds):
    """Every round's jobs as one sample (each side's parts too), and the mean CPU use."""

    def together(runs):
        parts = {}
        for _, run_parts in runs:
            for part, seconds in run_parts.items():
                parts.setdefault(part, []).extend(seconds)
        return [s for total, _ in runs for s in total], parts

    def spent(usages):
        parts = {}
        for _, by_part in usages:
            for part, seconds in by_part.items():
                parts[part] = parts.get(part, 0.0) + seconds
        return sum(percent for percent, _ in usages) / len(usages), parts

    busy = tuple(spent([r[2][i] for r in rounds]) for i in (0, 1))
    return together([r[0] for r in rounds]), together([r[1] for r in rounds]), busy


def compare(label, direct_and_parts, portal_and_parts, busy, rounds=None):
    """Direct against portal, each split in parts; how busy the machine's CPUs were in each.
    `rounds`: the rounds pooled here, for an interval that covers their drift too."""
    (direct, direct_parts), (portal, portal_parts) = direct_and_parts, portal_and_parts
    print(f"{label} (CPUs busy: {busy[0][0]:.0f}% direct, {busy[1][0]:.0f}% portal):")
    d50, d99 = report("  direct", direct)
    for part, seconds in direct_parts.items():
        report(part, seconds)
    p50, p99 = report("  portal", portal)
    for part, seconds in portal_parts.items():
        report(part, seconds)
    samples = [(r[0][0], r[1][0]) for r in rounds] if rounds else [(direct, portal)]
    added = " and ".join(
        f"{100 * (p / d - 1):+.0f}% at p{q} (95% interval {low:+.0%} to {high:+.0%})"
        for q, d, p, (low, high) in (
            (50, d50, p50, added_interval(samples, 50)),
            (99, d99, p99, added_interval(samples, 99)),
        )
    )
    print(f"  portal adds {added} (target: at most +10%)", flush=True)
    cpu_by_part(busy, len(direct), len(portal))


def cpu_by_part(busy, direct_jobs, portal_jobs):
    """The CPU each part of the test bed spent a job, direct and portal, most first: where the
    portal's own work goes, and what it costs the cluster's parts."""
    direct, portal = busy[0][1], busy[1][1]
    parts = sorted(set(direct) | set(portal), key=lambda p: -portal.get(p, 0.0))
    print(
        "  CPU a job, direct / portal: "
        + ", ".join(
            f"{part} {1000 * direct.get(part, 0.0) / direct_jobs:.0f}"
            f"/{1000 * portal.get(part, 0.0) / portal_jobs:.0f} ms"
            for part in parts
        ),
        flush=True,
    )


def added_interval(rounds, p, draws=2000):
    """A 95% bootstrap interval of what the portal adds at percentile `p`, over `rounds` (each
    a pair of the direct and the portal jobs' times): the rounds drawn again with replacement,
    then each side's jobs within each, `draws` times. One round: its jobs' spread only; more:
    the drift of the machine's load between rounds as well."""
    rng = random.Random(7)
    added = []
    for _ in range(draws):
        picked = rng.choices(rounds, k=len(rounds)) if len(rounds) > 1 else rounds
        direct = [t for d, _ in picked for t in rng.choices(d, k=len(d))]
        portal = [t for _, q in picked for t in rng.choices(q, k=len(q))]
        added.append(percentile(portal, p) / percentile(direct, p) - 1)
    added.sort()
    return added[int(0.025 * draws)], added[int(0.975 * draws) - 1]


def report_drain(direct_drain, portal_drain):
    print(f"draining {DRAIN_JOBS} jobs of 8 GPUs x 2 s, 100 at a time:")
    print(f"direct   {direct_drain[0]:6.1f} s ({DRAIN_JOBS / direct_drain[0]:.1f} jobs/s)")
    print(f"portal   {portal_drain[0]:6.1f} s ({DRAIN_JOBS / portal_drain[0]:.1f} jobs/s)")
    report("wait in Volcano's queue (direct)", direct_drain[1])
    report("wait in the portal's queue", portal_drain[1])
    report("then wait in Volcano's queue", portal_drain[2])
    print(
        f"the portal's queue held jobs while Volcano had none waiting: {portal_drain[3]:.1f} s "
        f"of {portal_drain[0]:.1f} s"
    )


if __name__ == "__main__":
    main()
