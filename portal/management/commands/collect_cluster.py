"""Watch Nodes, GPU pods, Volcano Queues, HyperNodes, RuntimeClasses, claims, StorageClasses and
ResourceQuotas like informers, and keep the console's snapshot (with its diagnostics) and the
nodes' GPU summary (what launches check against) in Redis;
watch the portal's Volcano jobs and reconcile a job as soon as Volcano changes its phase or pod
counts (the periodic resync stays as the safety net). Runs as its own service beside the
worker."""

import logging
import signal
import threading
import time

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections
from django.db.models import F
from django.utils import timezone

from core import snapshot as store
from core.cluster import PUBLISH_EVERY, get_cluster, publish_node_gpus
from core.heap import freeze_loaded
from core.reconcile import enqueue, resync
from jobs.choices import PHASES, JobState
from jobs.models import Job
from jobs.tasks import observe_finished, observe_started, workspace_deleted
from k8s_adapters import inventory
from k8s_adapters.informer import Informer, listing, unheard, wait_synced
from k8s_adapters.labels import MANAGED_BY, PORTAL
from k8s_adapters.tenant import QUOTA_NAME
from k8s_adapters.volcano import VCJOB_API, reduce_vcjob
from tenants.constants import NAMESPACE_PREFIX
from tenants.models import Tenant

logger = logging.getLogger(__name__)
PUBLISH_RETRY = 5  # seconds before publishing again after a failure
# Seconds an informer may fail before the console says its kind is not current (a watch that
# reconnects at once is no news).
BLIND_AFTER = 120

KINDS = [
    ("v1", "Node", inventory.reduce_node),
    ("v1", "Pod", inventory.reduce_pod),
    ("scheduling.volcano.sh/v1beta1", "Queue", inventory.reduce_queue),
    ("node.k8s.io/v1", "RuntimeClass", inventory.reduce_name),
    ("topology.volcano.sh/v1alpha1", "HyperNode", inventory.reduce_hypernode),
    ("v1", "PersistentVolumeClaim", inventory.reduce_claim),
    ("storage.k8s.io/v1", "StorageClass", inventory.reduce_storage_class),
    ("v1", "ResourceQuota", inventory.reduce_quota),
]


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument(
            "--interval",
            type=float,
            default=0.5,
            help="at most this often a changed snapshot is written (seconds)",
        )
        parser.add_argument(
            "--history-interval",
            type=float,
            default=300,
            help="seconds between history samples (7 days are kept)",
        )

    def handle(self, *args, interval, history_interval, **options):
        changed = threading.Event()
        stop = threading.Event()
        informers = [
            Informer(
                get_cluster(),
                api,
                kind,
                reduce=reduce,
                on_change=changed.set,
                on_update=FOLLOW.get(kind),
            )
            for api, kind, reduce in KINDS
        ]
        jobs = Informer(
            get_cluster(),
            VCJOB_API,
            "Job",
            reduce=reduce_vcjob,
            on_change=lambda: None,
            labels={MANAGED_BY: PORTAL},
            on_update=follow_job,
        )
        scheduler = Informer(
            get_cluster(),
            "v1",
            "ConfigMap",
            reduce=inventory.reduce_scheduler_config,
            on_change=changed.set,
            namespace=settings.VOLCANO_NAMESPACE,
        )
        informers.append(scheduler)

        def stopped(signum, frame):  # a pod's stop: end now, not killed after its grace period
            stop.set()
            changed.set()

        signal.signal(signal.SIGTERM, stopped)  # before the first list, which may take long
        for informer in [*informers, jobs]:
            threading.Thread(
                target=informer.run, args=(stop,), daemon=True, name=informer.kind
            ).start()
        started = time.monotonic()
        if wait_synced(informers, stop=stop):
            said = f"collector synced in {time.monotonic() - started:.1f}s"
        else:
            said = "collector: not every kind listed in 30s; publishing once nodes and pods are"
        freeze_loaded()  # with the caches just listed (see core.heap)
        self.stdout.write(said, ending="\n")
        self.stdout.flush()
        sampled = 0.0
        # Until nodes and pods are listed, a snapshot would say the cluster has no GPUs, or that
        # all are free: the last good one stays, for as long as a failing list may take to be
        # said (then the snapshot says which kinds it cannot read).
        counted = [i for i in informers if i.kind in ("Node", "Pod")]
        patience = time.monotonic() + BLIND_AFTER
        try:
            while not stop.is_set():
                changed.wait(timeout=min(history_interval, PUBLISH_EVERY))
                changed.clear()
                if not all(i.synced for i in counted) and time.monotonic() < patience:
                    stop.wait(interval)
                    continue
                try:
                    snapshot = self.publish(informers, jobs)
                    if time.monotonic() - sampled >= history_interval:
                        store.append_sample(snapshot)
                        sampled = time.monotonic()
                except Exception:  # Redis restarting, say: the watches go on; publish again
                    logger.exception("collector: publishing the snapshot failed; retrying")
                    changed.set()
                    time.sleep(PUBLISH_RETRY)
                stop.wait(interval)
        except KeyboardInterrupt:
            stop.set()
        self.stdout.write("collector stopped", ending="\n")

    def publish(self, informers, jobs):
        stores = {i.kind: list(i.store.values()) for i in informers}
        snapshot = inventory.snapshot(
            stores["Node"],
            stores["Pod"],
            stores["Queue"],
            stores["RuntimeClass"],
            stores["HyperNode"],
            claims=stores["PersistentVolumeClaim"],
            storage_classes=stores["StorageClass"],
            quotas=stores["ResourceQuota"],
            scheduler_configs=stores["ConfigMap"],
        )
        snapshot["at"] = timezone.now().isoformat()
        now = time.time()
        blind = [said for i in [*informers, jobs] if (said := unheard(i, now, BLIND_AFTER))]
        snapshot["diagnostics"] = [*blind, *snapshot["diagnostics"]]
        store.write(snapshot)
        nodes = next(i for i in informers if i.kind == "Node")
        # Not before nodes are listed (0 GPUs is not news), nor while their watch fails: launches
        # then read the nodes themselves once the last summary published lapses.
        if nodes.synced and not unheard(nodes, now, BLIND_AFTER):
            publish_node_gpus(inventory.summarize_gpus(stores["Node"]))
        return snapshot


# Phases of a job that waits: those the portal shows as pending, and none yet (Volcano's
# controller has not seen it).
WAITING = frozenset({""} | {phase for phase, state in PHASES.items() if state == JobState.PENDING})


def follow_job(old, new):
    """Volcano changed a job's phase or counts (or it vanished): reconcile that job now. Not
    while it only moves between waiting phases (created, Pending, Inqueue, pods being created):
    it waits all along, and why is read by the job resync; nor when only Volcano's message
    changed, which the next run reads. A waiting job that starts running is written at once
    (`observe_started`), and then needs no run: nothing else changes when a job starts. A job
    that ends is written at once too (`observe_finished`: Volcano may delete it the moment it
    ends, before a run reads it), and its run still comes, to remove its routes."""
    if not _in_its_tenant(new or old):
        return
    if new and new["phase"] in WAITING and (old is None or old["phase"] in WAITING):
        return
    if old and new and (old["phase"], old["counts"]) == (new["phase"], new["counts"]):
        return
    current = new or old
    close_old_connections()  # a long-lived thread: drop a connection the database closed
    recorded = False
    try:
        if new and new["phase"] == "Running" and (old is None or old["phase"] in WAITING):
            recorded = observe_started(
                new["tenant"], new["name"], new["phase"], new["counts"], new.get("message", "")
            )
        elif new and (old is None or old["phase"] != new["phase"]):
            observe_finished(
                new["tenant"], new["name"], new["phase"], new["counts"], new.get("message", "")
            )
    finally:  # unless written, the run comes whatever happened to that write
        if not recorded:
            reconcile_job(current["tenant"], current["name"])


def follow_claim(old, new):
    """A finished job's workspace claim deleted outside the portal: its storage no longer
    counts. A job's claim was bound: a job that waits for that (its run found the claim unbound and
    showed the job Pending) is submitted now. Not one whose first run still waits for the bind
    (that run submits it), nor a queued one (its claim was made ahead; admission submits it).
    A bind seen in the instant a run stops waiting, before it shows the job Pending, is left to
    that run's re-check a few seconds later. Only a change seen (not every bound claim listed at
    start: jobs waiting then come back by their own re-check)."""
    if not _in_its_tenant(new or old):
        return
    if old and new is None and old["portal"] and old["job"]:
        close_old_connections()
        workspace_deleted(old["tenant"], old["job"], old["name"])
        return
    if old and new and new["job"] and new["phase"] == "Bound" and old["phase"] != "Bound":
        close_old_connections()
        waiting = Job.objects.filter(
            tenant__slug=new["tenant"], name=new["job"], state=JobState.PENDING, phase=""
        )
        if (pk := waiting.values_list("pk", flat=True).first()) is not None:
            enqueue("jobs.reconcile_job", pk)


def follow_quota(old, new):
    """A tenant's ResourceQuota counted again (a pod started or ended): the tenant's usage,
    which its pages show, is written now rather than at the tenant's next resync."""
    if new is None or not new["tenant"] or new["name"] != QUOTA_NAME:
        return
    if old is not None and old["used"] == new["used"]:
        return
    close_old_connections()
    tenant = Tenant.objects.filter(slug=new["tenant"]).first()
    if tenant and tenant.namespace == new["namespace"] and tenant.observed_usage != new["used"]:
        written = F("usage_writes") + 1  # a run of its reconcile that read it before keeps off
        Tenant.objects.filter(pk=tenant.pk).update(observed_usage=new["used"], usage_writes=written)


def _in_its_tenant(obj):
    """Whether a labelled object sits in the namespace of the tenant its label names: labels
    are anyone's to write, and one elsewhere must not end or touch that tenant's jobs."""
    return obj["namespace"] == f"{NAMESPACE_PREFIX}{obj['tenant']}"


FOLLOW = {"PersistentVolumeClaim": follow_claim, "ResourceQuota": follow_quota}


def reconcile_job(tenant, name):
    """A run of the job now; behind the runs changes send when a list found it (every job at
    the collector's start), as a resync's are."""
    pk = Job.objects.filter(tenant__slug=tenant, name=name).values_list("pk", flat=True).first()
    if pk is not None:
        if listing():
            resync("jobs.reconcile_job", [pk])
        else:
            enqueue("jobs.reconcile_job", pk)
