"""The admin console and the researchers' capacity view, read from the collector's snapshot."""

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import render
from rest_framework.response import Response
from rest_framework.views import APIView

from core import snapshot as store
from jobs.choices import JobState
from jobs.models import Job
from k8s_adapters.inventory import unfittable
from tenants.access import require_platform_admin
from tenants.models import Tenant

NODES_PER_PAGE = 200
SORTS = {
    "name": lambda n: n["name"],
    "free": lambda n: -n["free"],
    "used": lambda n: -n["used"],
    "product": lambda n: (n["product"], n["name"]),
}


def _empty():
    return {
        "nodes": [],
        "products": {},
        "totals": {},
        "tenants": {},
        "queues": [],
        "runtime_classes": [],
        "hypernodes": [],
        "diagnostics": [],
        "at": None,
    }


def pending_diagnostics(snapshot):
    """Pending or queued jobs that no node could ever fit."""
    found = []
    jobs = Job.objects.filter(state__in=[JobState.PENDING, JobState.QUEUED]).select_related(
        "tenant"
    )
    for job in jobs:
        for task in job.spec.get("tasks", []):
            reason = unfittable(task.get("gpus", 0), task.get("gpu_product", ""), snapshot["nodes"])
            if task.get("gpus") and reason:
                found.append(
                    {
                        "kind": "unschedulable-job",
                        "subject": f"job {job}",
                        "cause": f"Task {task['name']} can never start: {reason}.",
                        "fix": "Relaunch with fewer GPUs per pod or another GPU product.",
                    }
                )
    return found


def tenant_usage(snapshot, tenants):
    return [
        {
            "slug": t.slug,
            "name": t.display_name,
            "quota": t.gpu_quota,
            "used": snapshot["tenants"].get(t.namespace, 0),
            "guarantee": t.queue_guarantee_gpus,
        }
        for t in tenants
    ]


def console_data(params):
    snapshot = store.read() or _empty()
    nodes = snapshot["nodes"]
    if params.get("product"):
        # Nodes without a product label are counted as "unknown" in the products table.
        nodes = [n for n in nodes if (n["product"] or "unknown") == params["product"]]
    if params.get("state") == "problem":
        nodes = [n for n in nodes if not n["ready"] or n["unschedulable"]]
    nodes = sorted(nodes, key=SORTS.get(params.get("sort", "name"), SORTS["name"]))
    return {
        **snapshot,
        "nodes": nodes,
        "diagnostics": snapshot["diagnostics"] + pending_diagnostics(snapshot),
        "tenant_usage": tenant_usage(snapshot, Tenant.objects.active()),
    }


@login_required
def console(request):
    require_platform_admin(request.user)
    data = console_data(request.GET)
    page = Paginator(data["nodes"], NODES_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "portal/console.html",
        {
            "data": data,
            "page": page,
            "params": request.GET,
            "query": query.urlencode(),
            "chart": store.chart(store.history()),
        },
    )


def capacity_data(user):
    snapshot = store.read() or _empty()
    return {
        "at": snapshot["at"],
        "products": snapshot["products"],
        "tenants": tenant_usage(snapshot, Tenant.objects.for_user(user).active()),
    }


@login_required
def capacity(request):
    return render(request, "portal/capacity.html", {"data": capacity_data(request.user)})


class ClusterView(APIView):
    """GPUs per node and product, per-tenant and per-queue usage, and diagnostics (platform
    admins)."""

    def get(self, request):
        require_platform_admin(request.user)
        return Response(console_data(request.query_params))


class CapacityView(APIView):
    """Free GPUs per product, and your tenants' usage against their quotas."""

    def get(self, request):
        return Response(capacity_data(request.user))
