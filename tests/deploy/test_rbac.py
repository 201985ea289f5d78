"""The chart's RBAC is sufficient and minimal. Its ServiceAccounts and roles are created in the
API server; the reconcile and collector tests then run with the portal acting as the worker's or
the collector's account (a TokenRequest token in KUBECONFIG) and pass. Each rule of the worker's
role removed in turn makes a test that needs it fail with the API server's 403; each rule of the
collector's roles removed makes the informers it serves refused. The web account reads what its
forms check, pods, logs and Events in tenant namespaces alone (where the worker bound its tenant
role), and writes nothing. The worker's ValidatingAdmissionPolicy is in place for all of it,
and refuses the worker's writes outside the portal's own namespaces, queues and routes."""

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml
from django.conf import settings

from k8s_adapters.client import Cluster
from k8s_adapters.errors import PermanentK8sError
from k8s_adapters.tenant import TenantSpec, build_namespace, build_web_binding
from k8s_adapters.volcano import VCJOB_API
from tests.helpers import wait_for

from .chart import DRIVERS, ROOT, named, render

RBAC_API = "rbac.authorization.k8s.io/v1"

# The tests that run as the worker's and as the collector's account.
WORKER_TESTS = [
    "tests/tenants/test_reconcile.py",
    "tests/jobs/test_launch.py",
    "tests/jobs/test_endpoints.py",
    "tests/jobs/test_reconciler.py",
    "tests/jobs/test_worker_crash.py",
    "tests/networking/test_reconcile.py",
    "tests/jobs/test_volcano.py",
]
# Web-side checks inside those files run as the web account (see the last test), not the worker.
WEB_ONLY = [
    "tests/jobs/test_launch.py::test_more_gpus_per_replica_than_any_node_has_is_a_warning",
    # runs the collector beside the worker: one account cannot stand for both processes
    "tests/jobs/test_volcano.py::"
    "test_a_job_follows_volcano_within_seconds_without_waiting_for_the_resync",
]
# The drivers besides the default (traefik, which the run above uses), each run with the role
# the chart renders for that driver.
PER_DRIVER = (
    "tests/jobs/test_endpoints.py::"
    "test_every_driver_routes_each_endpoint_by_its_host_to_the_portal_by_id"
)
CONSOLE = "tests/portal/test_console.py"
GPU_NUMBERS = (
    f"{CONSOLE}::test_the_console_shows_exact_gpu_numbers_and_diagnostics_from_the_cluster"
)
CLUSTER_OBJECTS = (
    f"{CONSOLE}::test_the_collector_shows_the_clusters_queues_runtime_classes_and_hypernodes"
)
COLLECTOR_TESTS = [GPU_NUMBERS, CLUSTER_OBJECTS]


def _test(path, name):
    return f"{path}::{name}"


TENANT = "tests/tenants/test_reconcile.py"
LAUNCH = "tests/jobs/test_launch.py"
ENDPOINTS = "tests/jobs/test_endpoints.py"
NADS = "tests/networking/test_reconcile.py"
TENANT_CREATED = _test(
    TENANT, "test_creating_a_tenant_creates_its_namespace_quota_limit_range_and_queue"
)
QUOTA_USAGE = _test(TENANT, "test_quota_usage_flows_back_from_the_cluster")
WEB_BOUND = _test(TENANT, "test_each_tenant_namespace_gets_the_binding_the_web_reads_it_through")
REPAIRED = _test(TENANT, "test_resync_repairs_objects_deleted_or_edited_by_hand")
QUOTA_EDITED = _test(TENANT, "test_editing_the_quota_updates_quota_and_queue")
LAUNCHED = _test(LAUNCH, "test_a_ddp_launch_creates_the_volcano_job_pvc_pair_and_ssh_secret")
VOLCANO = "tests/jobs/test_volcano.py"  # on the real Volcano and KWOK nodes
CANCELLED = _test(VOLCANO, "test_cancel_aborts_through_volcanos_command")
GANG_WAITS = _test(VOLCANO, "test_a_gang_that_does_not_fit_starts_no_pod_and_says_why")
QUEUE_FULL = _test(VOLCANO, "test_a_full_queue_keeps_the_job_pending_and_says_so")
DELETED = _test(LAUNCH, "test_delete_removes_everything_the_job_owns_but_keeps_the_data_volume")
ROUTED = _test(
    ENDPOINTS, "test_each_http_endpoint_gets_its_own_host_service_and_forward_auth_by_id"
)
NAD_MADE = _test(NADS, "test_each_allowed_tenant_gets_a_valid_nad_with_whereabouts")
ALLOCATIONS = _test(
    NADS,
    "test_whereabouts_allocations_show_in_utilization_and_conflicts_are_flagged_and_fixed",
)
# For each rule of the worker's ClusterRole (by its resources), a test that fails without it.
WORKER_RULE_NEEDED_BY = {
    "namespaces": TENANT_CREATED,
    "resourcequotas": QUOTA_USAGE,
    "limitranges": REPAIRED,
    "networkpolicies": TENANT_CREATED,
    "queues": QUOTA_EDITED,
    "jobs": LAUNCHED,
    "commands": CANCELLED,
    "podgroups": GANG_WAITS,
    "events": QUEUE_FULL,
    "persistentvolumeclaims": LAUNCHED,
    "secrets": LAUNCHED,
    "services": ROUTED,
    "ingresses": DELETED,
    "ingressroutes": ROUTED,
    "middlewares": ROUTED,
    "httproutes": DELETED,
    "network-attachment-definitions": NAD_MADE,
    "ippools": ALLOCATIONS,
    "overlappingrangeipreservations": ALLOCATIONS,
    "pods": ALLOCATIONS,
    "storageclasses": LAUNCHED,
    "rolebindings": WEB_BOUND,
    "clusterroles": WEB_BOUND,  # bind, the web's tenant role alone
}

pytestmark = pytest.mark.timeout(1800)


def _grants(rules):
    return {
        (group, resource, verb, name)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
        for name in rule.get("resourceNames") or [""]
    }


class Identities:
    """The chart's accounts and roles in the API server, and a kubeconfig for each account."""

    def __init__(self, admin, helm_path, folder):
        self.admin, self.folder = admin, folder
        self.release = f"rbac-{uuid.uuid4().hex[:6]}"
        self.namespace = f"{self.release}-system"
        self.manifests = [
            m
            for m in render(helm_path, self.release, self.namespace)
            if m["kind"]
            in (
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Role",
                "RoleBinding",
                "ValidatingAdmissionPolicy",
                "ValidatingAdmissionPolicyBinding",
            )
        ]

    def name(self, component):
        return f"{self.release}-gpu-portal-{component}"

    @property
    def web_role(self):
        """The ClusterRole the web reads tenant namespaces with (bound there by the worker)."""
        return named(self.manifests, "ClusterRole", "-web-tenant")["metadata"]["name"]

    def user(self, component):
        return f"system:serviceaccount:{self.namespace}:{self.name(component)}"

    def create(self):
        # Volcano's namespace (the collector's Role lives there) stays: Volcano may use it.
        for namespace in (self.namespace, settings.VOLCANO_NAMESPACE):
            self.admin.apply_one(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )
        for manifest in self.manifests:
            manifest["metadata"].setdefault("namespace", self.namespace)
            self.admin.apply_one(manifest)
        self.kubeconfigs = {c: self._kubeconfig(c) for c in ("web", "worker", "collector")}
        self._policy_seen()

    def _policy_seen(self):
        """Wait until the API server enforces the worker's policy (its informer syncs)."""
        worker = Cluster.connect(self.kubeconfigs["worker"])
        probe = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "probe", "namespace": self.namespace},
        }

        def refused():
            try:
                worker.apply_one(probe, dry_run=True)
            except PermanentK8sError as exc:
                return "denied request" in exc.message
            return False

        wait_for(refused, timeout=60, message="the worker's admission policy to be enforced")

    def _kubeconfig(self, component):
        token = self.admin.service_account_token(self.namespace, self.name(component))
        config = yaml.safe_load(Path(settings.KUBECONFIG).read_text())
        config["users"] = [{"name": "admin", "user": {"token": token}}]
        path = self.folder / f"{component}.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        return path

    def role(self, component):
        return named(self.manifests, "ClusterRole", f"-{component}")

    def set_rules(self, component, rules):
        """Replace the role's rules and wait until the authorizer has seen the change."""
        role = self.role(component)
        self.admin.apply_one({**role, "rules": rules})
        expect, every = _grants(rules), _grants(role["rules"]) | _grants(rules)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            seen = {
                t for t in every if self.admin.allowed(self.user(component), t[2], t[0], t[1], t[3])
            }
            if seen == expect:
                return
            time.sleep(0.2)
        pytest.fail(f"the authorizer never applied the new rules of {role['metadata']['name']}")

    def delete(self):
        for manifest in self.manifests:
            if manifest["kind"] != "ServiceAccount":
                meta = manifest["metadata"]
                namespace = meta.get("namespace") if manifest["apiVersion"] == RBAC_API else None
                self.admin.delete(manifest["apiVersion"], manifest["kind"], meta["name"], namespace)
        self.admin.delete("v1", "Namespace", self.namespace)


@pytest.fixture(scope="module")
def identities(cluster, helm_path, tmp_path_factory):
    made = Identities(cluster, helm_path, tmp_path_factory.mktemp("rbac"))
    try:
        made.create()
        yield made
    finally:
        made.delete()


def run_tests(identities, component, tests, log, *options):
    """Run tests in a pytest of their own, the portal acting as the `component`'s account while
    the tests' own set-up keeps the admin kubeconfig; on their own database and Redis database.
    A collector a worker's test runs beside it acts as the collector's account, as deployed
    (one account cannot stand for both processes)."""
    db = settings.DATABASES["default"]
    kubeconfig = identities.kubeconfigs[component]
    collector = identities.kubeconfigs["collector" if component == "worker" else component]
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "TEST_COLLECTOR_KUBECONFIG": str(collector),
        "TEST_ADMIN_KUBECONFIG": settings.KUBECONFIG,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/portal_rbac",
        "REDIS_URL": settings.REDIS_URL.rsplit("/", 1)[0] + "/5",
        # As the chart sets them: each tenant's run binds the web's tenant role there.
        "WEB_TENANT_ROLE": identities.web_role,
        "WEB_ACCOUNT": f"{identities.namespace}/{identities.name('web')}",
    }
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--reuse-db", *options]
    result = subprocess.run(
        [*args, *tests], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500
    )
    log.write_text(result.stdout + result.stderr)
    return result


def test_the_worker_account_passes_every_reconcile_test(identities, tmp_path):
    deselect = [arg for test in [*WEB_ONLY, PER_DRIVER] for arg in ("--deselect", test)]
    result = run_tests(identities, "worker", WORKER_TESTS, tmp_path / "worker.log", *deselect)
    assert result.returncode == 0, result.stdout[-4000:]
    assert " passed" in result.stdout
    assert " failed" not in result.stdout


@pytest.mark.parametrize("driver", [d for d in DRIVERS if d != "traefik"])
def test_the_worker_account_of_each_driver_routes_endpoints(
    identities, helm_path, driver, tmp_path
):
    rules = named(
        render(helm_path, identities.release, identities.namespace, **{"routing.driver": driver}),
        "ClusterRole",
        "-worker",
    )["rules"]
    identities.set_rules("worker", rules)
    try:
        result = run_tests(identities, "worker", [f"{PER_DRIVER}[{driver}]"], tmp_path / "run.log")
    finally:
        identities.set_rules("worker", identities.role("worker")["rules"])
    assert result.returncode == 0, result.stdout[-4000:]
    assert "1 passed" in result.stdout


def test_the_collector_account_passes_the_collector_test(identities, tmp_path):
    result = run_tests(identities, "collector", COLLECTOR_TESTS, tmp_path / "collector.log")
    assert result.returncode == 0, result.stdout[-4000:]


def test_every_worker_rule_has_a_test_that_needs_it(identities):
    resources = [r for rule in identities.role("worker")["rules"] for r in rule["resources"]]
    assert sorted(resources) == sorted(WORKER_RULE_NEEDED_BY)


def _without(rules, index):
    return [rule for i, rule in enumerate(rules) if i != index]


def _rule_index(rules, resource):
    [index] = [i for i, rule in enumerate(rules) if resource in rule["resources"]]
    return index


@pytest.mark.parametrize("resource", sorted(WORKER_RULE_NEEDED_BY))
def test_without_a_worker_rule_a_reconcile_test_fails_forbidden(identities, resource, tmp_path):
    rules = identities.role("worker")["rules"]
    identities.set_rules("worker", _without(rules, _rule_index(rules, resource)))
    try:
        result = run_tests(
            identities, "worker", [WORKER_RULE_NEEDED_BY[resource]], tmp_path / "run.log"
        )
    finally:
        identities.set_rules("worker", rules)
    assert result.returncode == 1, result.stdout[-4000:]
    assert "forbidden" in result.stdout.lower(), result.stdout[-4000:]


def collector_reads():
    """(apiVersion, kind, namespace) of every informer the collector runs: it lists, then
    watches from the list's version."""
    from portal.management.commands.collect_cluster import KINDS

    reads = [(api, kind, None) for api, kind, _ in KINDS]
    return [*reads, (VCJOB_API, "Job", None), ("v1", "ConfigMap", settings.VOLCANO_NAMESPACE)]


def inform(cluster, api, kind, namespace):
    _, version = cluster.list_with_version(api, kind, namespace=namespace)
    for _event in cluster.watch(
        api, kind, resource_version=version, namespace=namespace, timeout=1
    ):
        pass


def test_the_collector_account_lists_and_watches_everything_it_informs_on(identities):
    collector = Cluster.connect(identities.kubeconfigs["collector"])
    for api, kind, namespace in collector_reads():
        inform(collector, api, kind, namespace)


def _collector_rules(identities):
    """(role manifest, rule index, resources) for each rule of the collector's two roles."""
    roles = [named(identities.manifests, kind, "-collector") for kind in ("ClusterRole", "Role")]
    return [
        (role, index, rule["resources"])
        for role in roles
        for index, rule in enumerate(role["rules"])
    ]


def _refused(cluster, api, kind, namespace):
    try:
        inform(cluster, api, kind, namespace)
    except PermanentK8sError as exc:
        return exc.status == 403
    return False


@pytest.mark.parametrize("rule", range(7))
def test_without_a_collector_rule_its_informers_are_refused(identities, cluster, rule):
    rules = _collector_rules(identities)
    assert len(rules) == 7  # a new rule needs a parameter here
    role, index, resources = rules[rule]
    collector = Cluster.connect(identities.kubeconfigs["collector"])
    reads = [r for r in collector_reads() if cluster.resource(r[0], r[1]).name in resources]
    assert {cluster.resource(api, kind).name for api, kind, _ in reads} == set(resources)
    identities.admin.apply_one({**role, "rules": _without(role["rules"], index)})
    try:
        for read in reads:
            wait_for(
                lambda read=read: _refused(collector, *read),
                timeout=30,
                message=f"{read[1]} to be refused without its rule",
            )
    finally:
        identities.admin.apply_one(role)
        for read in reads:
            wait_for(
                lambda read=read: not _refused(collector, *read),
                timeout=30,
                message=f"{read[1]} to be allowed again",
            )


def test_the_web_account_reads_what_its_forms_check_and_writes_nothing(
    identities, cluster, namespace
):
    web = Cluster.connect(identities.kubeconfigs["web"])
    assert web.get("v1", "Namespace", namespace)["metadata"]["name"] == namespace
    web.list("v1", "Node")
    # Whereabouts' IPPools (every tenant's allocations), in its namespace alone.
    pools = settings.WHEREABOUTS_NAMESPACE
    assert web.get("whereabouts.cni.cncf.io/v1alpha1", "IPPool", "none", pools) is None
    with pytest.raises(PermanentK8sError) as elsewhere:
        web.get("whereabouts.cni.cncf.io/v1alpha1", "IPPool", "none", namespace)
    assert elsewhere.value.status == 403
    # A tenant form: the queue's name free, and its department's queue and its children.
    assert web.get("scheduling.volcano.sh/v1beta1", "Queue", "no-such-queue") is None
    web.list("scheduling.volcano.sh/v1beta1", "Queue")
    writes = [
        lambda: web.apply_one(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"{namespace}-x"}}
        ),
        lambda: web.delete("v1", "Namespace", namespace),
        lambda: web.apply_one(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "s", "namespace": namespace},
            }
        ),
        lambda: web.list("v1", "Secret", namespace=namespace),
        lambda: web.apply_one(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "c", "namespace": namespace},
            }
        ),
    ]
    for write in writes:
        with pytest.raises(PermanentK8sError) as refused:
            write()
        assert refused.value.status == 403


def _web_reads(web, namespace):
    """What a job's pages and a tenant's page read in the tenant's namespace: a job's pods,
    their Events, a pod and its log (there is none: 404 once allowed), its Volcano jobs, the
    quota."""
    return {
        "pods": lambda: web.list("v1", "Pod", namespace=namespace),
        "events": lambda: web.list("v1", "Event", namespace=namespace),
        "a pod": lambda: web.get("v1", "Pod", "no-such-pod", namespace),
        "a log": lambda: list(web.pod_log("no-such-pod", namespace)),
        "a log read on": lambda: web.pod_log_stamped("no-such-pod", namespace, limit_bytes=1024),
        "Volcano jobs": lambda: web.list(VCJOB_API, "Job", namespace=namespace),
        "the quota": lambda: web.get("v1", "ResourceQuota", "gpu-portal", namespace),
    }


def _status(read):
    try:
        read()
    except PermanentK8sError as exc:
        return exc.status
    return 200


def test_the_web_reads_pods_and_logs_only_in_tenant_namespaces_the_worker_bound_it_in(
    identities, cluster
):
    """The web faces the browsers: a stolen web token reads no pod, log or Event outside tenant
    namespaces (another namespace's pods hold their environment, their logs whatever was
    printed). In a tenant's namespace it reads them once the worker bound the web's tenant role
    there, as each tenant's run does; the worker binds no other role, and that one to no one
    else."""
    web = Cluster.connect(identities.kubeconfigs["web"])
    worker = Cluster.connect(identities.kubeconfigs["worker"])
    slug = f"rbac-{uuid.uuid4().hex[:6]}"
    spec = TenantSpec(
        slug=slug,
        namespace=f"tenant-{slug}",
        queue=f"tenant-{slug}",
        display_name="RBAC",
        gpus=0,
        cpu=1,
        memory_gib=1,
        storage_gib=1,
        pvcs=1,
        pods=1,
        web_role=identities.web_role,
        web_account=f"{identities.namespace}/{identities.name('web')}",
    )
    tenant_ns = spec.namespace
    cluster.apply_one(build_namespace(spec))
    try:
        assert {what: _status(read) for what, read in _web_reads(web, tenant_ns).items()} == (
            dict.fromkeys(_web_reads(web, tenant_ns), 403)
        )
        binding = build_web_binding(spec)
        worker.apply_one(binding)
        allowed = {
            "pods": 200,
            "events": 200,
            "a pod": 200,  # None: there is none
            "a log": 404,
            "a log read on": 404,
            "Volcano jobs": 200,
            "the quota": 200,
        }
        wait_for(
            lambda: {w: _status(r) for w, r in _web_reads(web, tenant_ns).items()} == allowed,
            timeout=30,
            message="the web's reads to be allowed once bound",
        )
        for elsewhere in (identities.namespace, "kube-system", settings.VOLCANO_NAMESPACE):
            said = {what: _status(read) for what, read in _web_reads(web, elsewhere).items()}
            assert said == dict.fromkeys(said, 403), elsewhere
        for web_wide in (lambda: web.list("v1", "Pod"), lambda: web.list("v1", "Event")):
            assert _status(web_wide) == 403
        web_account = binding["subjects"][0]
        someone_else = {**web_account, "name": "default", "namespace": tenant_ns}
        other_role = {**binding["roleRef"], "name": "admin"}
        # A role the worker holds every right of, so RBAC lets it bind that: the policy refuses.
        worker_role = {**binding["roleRef"], "name": identities.role("worker")["metadata"]["name"]}
        refused = {  # each, and what refuses it: the policy, or RBAC's own check of a grant
            "the web's role to another account": (
                {**binding, "subjects": [someone_else]},
                "binds only",
            ),
            "the web's role to one more account": (
                {
                    **binding,
                    "metadata": {**binding["metadata"], "name": "more"},
                    "subjects": [*binding["subjects"], someone_else],
                },
                "binds only",
            ),
            "the web's name in another namespace": (
                {**binding, "subjects": [{**web_account, "namespace": tenant_ns}]},
                "binds only",
            ),
            "the worker's own role to the web": (
                {
                    **binding,
                    "metadata": {**binding["metadata"], "name": "own"},
                    "roleRef": worker_role,
                },
                "binds only",
            ),
            "another role to the web": (
                {
                    **binding,
                    "metadata": {**binding["metadata"], "name": "other"},
                    "roleRef": other_role,
                },
                "forbidden",
            ),
        }
        for what, (manifest, by) in refused.items():
            said = _refusal(lambda manifest=manifest: worker.apply_one(manifest))
            assert said is not None, what
            assert by in said, (what, said)
        # Nor does it delete a binding it did not make (a tenant admin's, say).
        theirs = {
            **binding,
            "metadata": {"name": "theirs", "namespace": tenant_ns},
            "subjects": [someone_else],
        }
        cluster.apply_one(theirs)
        said = _refusal(lambda: worker.delete(RBAC_API, "RoleBinding", "theirs", tenant_ns))
        assert "deletes only" in (said or ""), said
        assert cluster.get(RBAC_API, "RoleBinding", "theirs", tenant_ns) is not None
    finally:
        cluster.delete("v1", "Namespace", tenant_ns)


def _refusal(act):
    try:
        act()
    except PermanentK8sError as exc:
        return exc.message
    return None


def test_the_worker_writes_nothing_outside_the_portals_own_namespaces_and_queues(
    identities, cluster
):
    """Its role is cluster-wide (tenants come and go), so its admission policy keeps a stolen
    worker token from writing anywhere else: no Secret or Volcano job in another namespace, no
    namespace that is not a tenant's, no tenant namespace without Pod Security, no queue of
    Volcano's own. It reads no Secrets at all."""
    worker = Cluster.connect(identities.kubeconfigs["worker"])
    slug = uuid.uuid4().hex[:6]
    ours = {"app.kubernetes.io/managed-by": "gpu-portal"}
    baseline = {**ours, "pod-security.kubernetes.io/enforce": "baseline"}

    def namespace(name, labels):
        return {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": labels},
        }

    def secret(namespace):
        meta = {"name": "keys", "namespace": namespace, "labels": ours}
        return {"apiVersion": "v1", "kind": "Secret", "metadata": meta}

    refused = {
        "a Secret elsewhere": lambda: worker.apply_one(secret(identities.namespace)),
        "a Secret in kube-system": lambda: worker.apply_one(secret("kube-system")),
        "a namespace not a tenant's": lambda: worker.apply_one(namespace(f"evil-{slug}", baseline)),
        "a tenant namespace without Pod Security": lambda: worker.apply_one(
            namespace(f"tenant-{slug}", ours)
        ),
        "a privileged tenant namespace": lambda: worker.apply_one(
            namespace(
                f"tenant-{slug}", {**ours, "pod-security.kubernetes.io/enforce": "privileged"}
            )
        ),
        "Volcano's default queue": lambda: worker.apply_one(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": "default", "labels": ours},
            }
        ),
    }
    for what, act in refused.items():
        said = _refusal(act)
        assert said is not None, what
        assert "denied request" in said, (what, said)
    assert "forbidden" in (_refusal(lambda: worker.list("v1", "Secret")) or "").lower()
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": f"tenant-{slug}", "labels": ours},
        "spec": {"weight": 1},
    }
    try:  # what a tenant's run writes
        worker.apply_one(namespace(f"tenant-{slug}", baseline))
        assert _refusal(lambda: worker.apply_one(secret(f"tenant-{slug}"))) is None
        assert _refusal(lambda: worker.apply_one(queue)) is None
    finally:
        cluster.delete("v1", "Namespace", f"tenant-{slug}")
        cluster.delete("scheduling.volcano.sh/v1beta1", "Queue", f"tenant-{slug}")
