"""The chart lints, renders for every routing driver, runs every process restricted, and the
API server accepts what it renders (server-side apply, dry run and for real)."""

import uuid

import pytest

from .chart import (
    CHART,
    DRIVERS,
    helm,
    named,
    of_kind,
    refused,
    render,
    required_values,
    set_args,
)

pytestmark = pytest.mark.timeout(600)


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_chart_lints_strictly_with_each_driver(helm_path, driver):
    values = {**required_values(), "routing.driver": driver}
    result = helm(helm_path, "lint", "--strict", str(CHART), *set_args(values), check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def test_an_install_without_secrets_says_what_is_missing(helm_path):
    result = helm(helm_path, "template", "p", str(CHART), check=False)
    assert result.returncode != 0
    assert "secretKey (or existingSecret) is required" in result.stderr


def test_an_existing_secret_replaces_the_charts_own(helm_path):
    manifests = render(helm_path, existingSecret="portal-secrets", secretKey="")
    assert of_kind(manifests, "Secret") == []
    web = named(manifests, "Deployment", "-web")
    env = web["spec"]["template"]["spec"]["containers"][0]["env"]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"]["name"] for e in env}
    keys = ("SECRET_KEY", "DATABASE_URL", "REDIS_URL", "SECRET_KEY_FALLBACKS")
    assert refs == dict.fromkeys(keys, "portal-secrets")


def test_an_unknown_driver_is_refused(helm_path):
    said = refused(helm_path, **{"routing.driver": "haproxy"})
    assert "routing.driver is traefik, gateway-api or ingress-nginx" in said


ROUTE_KINDS = {"ingresses", "ingressroutes", "middlewares", "httproutes"}
WRITTEN_ROUTES = {
    "traefik": {"ingressroutes", "middlewares"},
    # Traefik's ForwardAuth via ExtensionRef, and the fallback for closed endpoints (one
    # IngressRoute for both Traefik-based drivers).
    "gateway-api": {"httproutes", "middlewares", "ingressroutes"},
    "ingress-nginx": {"ingresses"},
}


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_worker_writes_routes_of_its_driver_only_and_prunes_all(helm_path, driver):
    manifests = render(helm_path, **{"routing.driver": driver})
    assert named(manifests, "ConfigMap", "gpu-portal-config")["data"]["ROUTING_DRIVER"] == driver
    rules = named(manifests, "ClusterRole", "-worker")["rules"]
    verbs = {res: set(r["verbs"]) for r in rules for res in r["resources"] if res in ROUTE_KINDS}
    assert {res for res, v in verbs.items() if "patch" in v} == WRITTEN_ROUTES[driver]
    assert all({"list", "delete"} <= v for v in verbs.values())
    assert set(verbs) == ROUTE_KINDS


def test_no_rule_is_wildcarded(helm_path):
    for role in of_kind(render(helm_path), "ClusterRole"):
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], (role["metadata"]["name"], rule)


def _pods(manifests):
    for kind in ("Deployment", "Job"):
        for workload in of_kind(manifests, kind):
            yield workload["metadata"]["name"], workload["spec"]["template"]["spec"]


def test_every_process_runs_non_root_read_only_without_privileges(helm_path):
    pods = dict(_pods(render(helm_path)))
    assert {name.rsplit("-", 1)[-1] for name in pods} == {
        "web",
        "worker",
        "beat",
        "collector",
        "migrate",
    }
    for name, pod in pods.items():
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["runAsUser"] == 10001, name
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["readOnlyRootFilesystem"] is True, name
            assert context["capabilities"] == {"drop": ["ALL"]}, name
            assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"], name


def test_only_processes_that_talk_to_the_cluster_hold_a_token(helm_path):
    pods = dict(_pods(render(helm_path)))
    for name, pod in pods.items():
        component = name.rsplit("-", 1)[-1]
        if component in ("beat", "migrate"):
            assert pod["automountServiceAccountToken"] is False, name
        else:
            assert pod["serviceAccountName"] == f"portal-gpu-portal-{component}", name


def test_accounts_made_outside_the_chart_are_used_and_bound_by_their_names(helm_path):
    """serviceAccounts.create false with the accounts' names (made for a cloud's workload
    identity, say): every pod runs as its account, the chart's roles are bound to those and the
    worker's admission policy names the worker's; no account of the chart's own naming appears."""
    names = {"web": "ui-sa", "worker": "reconciler-sa", "collector": "watcher-sa"}
    manifests = render(
        helm_path,
        **{"serviceAccounts.create": False},
        **{f"serviceAccounts.names.{component}": name for component, name in names.items()},
    )
    assert not of_kind(manifests, "ServiceAccount")
    for workload, pod in _pods(manifests):
        component = workload.rsplit("-", 1)[-1]
        if component in names:
            assert pod["serviceAccountName"] == names[component], workload
    subjects = {
        subject["name"]
        for kind in ("ClusterRoleBinding", "RoleBinding")
        for binding in of_kind(manifests, kind)
        for subject in binding["subjects"]
    }
    assert subjects == set(names.values())
    [policy] = of_kind(manifests, "ValidatingAdmissionPolicy")
    [condition] = policy["spec"]["matchConditions"]
    assert condition["expression"].endswith('"system:serviceaccount:gpu-portal:reconciler-sa"')
    # The web's reads of tenant namespaces are bound to its account, by the worker.
    assert named(manifests, "ConfigMap", "gpu-portal-config")["data"]["WEB_ACCOUNT"] == (
        f"gpu-portal/{names['web']}"
    )
    [web_reads] = [v for v in policy["spec"]["variables"] if v["name"] == "webReads"]
    assert f'object.subjects[0].name == "{names["web"]}"' in web_reads["expression"]
    default = render(helm_path)  # and by default, the chart's own, named after the release
    assert {a["metadata"]["name"] for a in of_kind(default, "ServiceAccount")} == {
        f"portal-gpu-portal-{component}" for component in names
    }


def _reads(role):
    return {
        (resource, verb)
        for rule in role["rules"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_web_reads_pods_logs_and_events_through_a_role_bound_in_tenant_namespaces(helm_path):
    """The web faces the browsers: cluster-wide it reads what forms check, and a job's pods,
    logs and Events through a role the worker binds in each tenant's namespace (and may bind,
    that one role alone), never the cluster's other pods."""
    manifests = render(helm_path)
    web, tenant = (named(manifests, "ClusterRole", s) for s in ("-web", "-web-tenant"))
    assert _reads(web) == {
        ("namespaces", "get"),
        ("nodes", "list"),
        ("queues", "get"),
        ("queues", "list"),
    }
    # Whereabouts' IPPools (every tenant's allocations) in Whereabouts' namespace alone.
    pools = named(manifests, "Role", "-web")
    assert (pools["metadata"]["namespace"], _reads(pools)) == ("kube-system", {("ippools", "get")})
    assert _reads(tenant) == {
        ("resourcequotas", "get"),
        ("pods", "list"),
        ("events", "list"),
        ("pods", "get"),
        ("pods/log", "get"),
        ("jobs", "list"),
    }
    role = tenant["metadata"]["name"]
    assert role == "portal-gpu-portal-gpu-portal-web-tenant"
    bound = [
        b["roleRef"]["name"]
        for k in ("ClusterRoleBinding", "RoleBinding")
        for b in of_kind(manifests, k)
    ]
    assert role not in bound  # by the worker, in tenant namespaces alone
    config = named(manifests, "ConfigMap", "gpu-portal-config")["data"]
    assert (config["WEB_TENANT_ROLE"], config["WEB_ACCOUNT"]) == (
        role,
        "gpu-portal/portal-gpu-portal-web",
    )
    [bind] = [
        r for r in named(manifests, "ClusterRole", "-worker")["rules"] if "bind" in r["verbs"]
    ]
    assert (bind["resources"], bind["verbs"], bind["resourceNames"]) == (
        ["clusterroles"],
        ["bind"],
        [role],
    )
    # Roles made by hand: the portal binds nothing, as the README says.
    config = named(render(helm_path, **{"rbac.create": False}), "ConfigMap", "gpu-portal-config")[
        "data"
    ]
    assert "WEB_TENANT_ROLE" not in config
    # Without the worker's policy its rights to bind would reach every namespace: it gets none,
    # and the web's tenant role is bound cluster-wide.
    unpoliced = render(helm_path, **{"rbac.workerPolicy": False})
    worker = named(unpoliced, "ClusterRole", "-worker")["rules"]
    assert not [r for r in worker if r["apiGroups"] == ["rbac.authorization.k8s.io"]]
    assert "WEB_TENANT_ROLE" not in named(unpoliced, "ConfigMap", "gpu-portal-config")["data"]
    [wide] = [b for b in of_kind(unpoliced, "ClusterRoleBinding") if b["roleRef"]["name"] == role]
    assert [s["name"] for s in wide["subjects"]] == ["portal-gpu-portal-web"]


@pytest.mark.parametrize("create", [True, False])
def test_one_account_given_to_two_processes_is_refused(helm_path, create):
    """The web's account named as the worker's would give the web the worker's writes (or,
    created, render the account twice)."""
    said = refused(
        helm_path,
        **{"serviceAccounts.create": create, "serviceAccounts.names.web": "shared-sa"},
        **{"serviceAccounts.names.worker": "shared-sa"},
    )
    assert "web, worker and collector one account each" in said


def test_migrations_run_as_a_hook_before_install_and_upgrade_and_beat_runs_once(helm_path):
    manifests = render(helm_path, **{"web.replicas": 3})
    job = named(manifests, "Job", "-migrate")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    [migrate] = job["spec"]["template"]["spec"]["containers"]
    assert migrate["args"] == ["migrate"]
    # It reads copies of the settings made before it and gone after it: the release's own
    # change with the Deployments, and are not changed by an upgrade whose migration fails.
    assert migrate["envFrom"] == [{"configMapRef": {"name": "portal-gpu-portal-migrate-config"}}]
    read = {e["valueFrom"]["secretKeyRef"]["name"] for e in migrate["env"] if "valueFrom" in e}
    assert read == {"portal-gpu-portal-migrate-secret"}
    for copy in (
        named(manifests, "ConfigMap", "-migrate-config"),
        named(manifests, "Secret", "-migrate-secret"),
    ):
        notes = copy["metadata"]["annotations"]
        assert notes["helm.sh/hook"] == "pre-install,pre-upgrade"
        assert int(notes["helm.sh/hook-weight"]) < int(
            job["metadata"]["annotations"]["helm.sh/hook-weight"]
        )
        assert "hook-succeeded" in notes["helm.sh/hook-delete-policy"]
    for own in (
        named(manifests, "ConfigMap", "gpu-portal-config"),
        named(manifests, "Secret", "gpu-portal-secret"),
    ):
        assert "helm.sh/hook" not in (own["metadata"].get("annotations") or {})
    for single in ("-beat", "-collector"):  # an upgrade never runs two side by side
        deployment = named(manifests, "Deployment", single)
        assert deployment["spec"]["replicas"] == 1
        assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    web = named(manifests, "Deployment", "-web")
    assert web["spec"]["replicas"] == 3
    # It still answers while the router has not yet seen it stop.
    [container] = web["spec"]["template"]["spec"]["containers"]
    assert container["lifecycle"]["preStop"] == {"sleep": {"seconds": 5}}


def test_web_is_probed_on_healthz_and_readyz_with_an_allowed_host(helm_path):
    web = named(render(helm_path), "Deployment", "-web")["spec"]["template"]["spec"]
    container = web["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    host = container["readinessProbe"]["httpGet"]["httpHeaders"]
    assert host == [{"name": "Host", "value": "portal.example.org"}]


def test_metrics_stay_off_the_portals_service(helm_path):
    manifests = render(helm_path)
    service = named(manifests, "Service", "-web")
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http"]
    web = named(manifests, "Deployment", "-web")["spec"]["template"]
    assert web["metadata"]["annotations"]["prometheus.io/port"] == "9100"


def _route_values(driver):
    return {
        "routing.driver": driver,
        "ingress.enabled": True,
        "httpRoute.enabled": True,
        "httpRoute.parentRefs[0].name": "gpu-portal",
        "httpRoute.parentRefs[0].namespace": "gpu-portal-router",
        "oidc.enabled": True,
        "oidc.serverUrl": "https://idp.example.org/realms/research",
        "oidc.clientSecret": "not-a-real-secret",
    }


CLUSTER_SCOPED = {
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_api_server_accepts_every_rendered_manifest(helm_path, cluster, namespace, driver):
    release = f"chart-{uuid.uuid4().hex[:6]}"
    # Volcano's namespace (the collector's Role) is the test's own here: no Volcano runs.
    values = {**_route_values(driver), "volcano.namespace": namespace}
    manifests = render(helm_path, release, namespace, **values)
    assert {"Ingress", "HTTPRoute", "Secret", "PodDisruptionBudget"} <= {
        m["kind"] for m in manifests
    }
    for manifest in manifests:
        manifest["metadata"].setdefault("namespace", namespace)
    try:
        for manifest in manifests:
            cluster.apply_one(manifest, dry_run=True)
        applied = cluster.apply(manifests)
        assert [(a["kind"], a["metadata"]["name"]) for a in applied] == [
            (m["kind"], m["metadata"]["name"]) for m in manifests
        ]
        # Named after the namespace too: a release of the same name elsewhere does not meet it.
        role = cluster.get(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            f"{release}-gpu-portal-{namespace}-worker",
        )
        assert role["rules"] == named(manifests, "ClusterRole", "-worker")["rules"]
    finally:
        for manifest in manifests:  # what the namespace's deletion leaves
            if manifest["kind"] in CLUSTER_SCOPED:
                cluster.delete(
                    manifest["apiVersion"], manifest["kind"], manifest["metadata"]["name"]
                )


def test_the_router_reaches_forward_auth_by_a_whole_name(helm_path):
    # ingress-nginx resolves its auth-url with nginx's own resolver, which does not search the
    # pod's DNS domains: a name short of the cluster's domain failed every job endpoint.
    def internal_url(**values):
        config = named(render(helm_path, **values), "ConfigMap", "gpu-portal-config")
        return config["data"]["PORTAL_INTERNAL_URL"]

    assert internal_url() == "http://portal-gpu-portal-web.gpu-portal.svc.cluster.local:80"
    assert internal_url(clusterDomain="corp.internal").endswith(".svc.corp.internal:80")


def test_settings_come_back_with_a_rollback_and_sign_in_limits_count_clients(helm_path):
    manifests = render(helm_path)  # release objects: a rollback applies its revision's
    for kind, name in (("ConfigMap", "gpu-portal-config"), ("Secret", "gpu-portal-secret")):
        assert "annotations" not in named(manifests, kind, name)["metadata"]
    assert named(manifests, "ConfigMap", "gpu-portal-config")["data"]["TRUSTED_PROXY_COUNT"] == "1"


def test_tenant_pods_reach_none_of_the_portals_pods(helm_path):
    """NetworkPolicies of the release: the router's namespace reaches the web pods' http port
    (pages and forward-auth), the monitoring namespace their metrics; the worker, collector,
    beat and migration take nothing but metrics. (No CNI here enforces them: rendered only.)"""
    manifests = render(helm_path)
    web = named(manifests, "NetworkPolicy", "-web")["spec"]
    assert web["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "web"
    assert web["policyTypes"] == ["Ingress"]
    pages, metrics = web["ingress"]
    assert pages["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gpu-portal-router"}}}
    ]
    assert pages["ports"] == [{"port": "http", "protocol": "TCP"}]
    assert metrics["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]
    background = named(manifests, "NetworkPolicy", "-background")["spec"]
    assert background["podSelector"]["matchExpressions"] == [
        {
            "key": "app.kubernetes.io/component",
            "operator": "In",
            "values": ["worker", "collector", "beat", "migrate"],
        }
    ]
    assert [rule["ports"] for rule in background["ingress"]] == [
        [{"port": "metrics", "protocol": "TCP"}]
    ]
    # A Service of its own to the outside: its port is open to all, as the Service is.
    public = named(render(helm_path, **{"service.type": "LoadBalancer"}), "NetworkPolicy", "-web")
    assert public["spec"]["ingress"][0] == {"ports": [{"port": "http", "protocol": "TCP"}]}
    none = render(helm_path, **{"metrics.enabled": 0})
    assert named(none, "NetworkPolicy", "-background")["spec"]["ingress"] == []
    assert not of_kind(render(helm_path, **{"networkPolicy.enabled": 0}), "NetworkPolicy")


@pytest.mark.parametrize(
    ("allowed", "probed"), [("*", "localhost"), (".example.org", "example.org")]
)
def test_probes_name_a_host_django_accepts_whatever_the_allowed_hosts(helm_path, allowed, probed):
    # Django refuses a request for the host "*": the pods never became ready, and restarted.
    web = named(render(helm_path, **{"portal.allowedHosts[0]": allowed}), "Deployment", "-web")
    probe = web["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]
    assert probe["httpHeaders"] == [{"name": "Host", "value": probed}]


def test_an_http_route_attached_to_no_gateway_is_refused(helm_path):
    assert "httpRoute.parentRefs names the Gateway" in refused(
        helm_path, **{"httpRoute.enabled": True}
    )


def test_the_charts_job_limits_reach_the_portal_as_it_reads_them(helm_path):
    """What job pods may reach and which RuntimeClasses they may name, from values.yaml to the
    settings a portal process reads from the ConfigMap."""
    from tests.processes import settings_under

    data = named(render(helm_path), "ConfigMap", "gpu-portal-config")["data"]
    names = ["TENANT_EGRESS_DENY", "TENANT_EGRESS_NAMESPACES", "RUNTIME_CLASSES"]
    assert settings_under(names, **{n: data[n] for n in names}) == [
        ["169.254.169.254/32", "fd00:ec2::254/128"],
        [],
        ["nvidia"],
    ]


def test_earlier_secret_keys_reach_every_process_from_the_secret(helm_path):
    manifests = render(helm_path, **{"secretKeyFallbacks": "{older,oldest}"})
    assert named(manifests, "Secret", "gpu-portal-secret")["stringData"][
        "SECRET_KEY_FALLBACKS"
    ] == ("older oldest")
    [web] = named(manifests, "Deployment", "-web")["spec"]["template"]["spec"]["containers"]
    [fallbacks] = [e for e in web["env"] if e["name"] == "SECRET_KEY_FALLBACKS"]
    assert (
        fallbacks["valueFrom"]["secretKeyRef"]["optional"] is True
    )  # an existing Secret may lack it
    plain = render(helm_path)
    assert "SECRET_KEY_FALLBACKS" not in named(plain, "Secret", "gpu-portal-secret")["stringData"]
