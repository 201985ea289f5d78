import yaml
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db.models import Max, Prefetch, prefetch_related_objects
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST, require_safe

from core.polling import polled
from core.validators import whole_number
from k8s_adapters.errors import K8sError
from networking.addresses import job_addresses
from tenants.access import get_tenant_for_user, has_role, require_platform_admin
from tenants.choices import Role
from tenants.views import apply_errors

from . import endpoints, logs, services
from .access import get_job_for_user, may_change, may_delete_volume
from .admission import free_gpus, queue_position, why_queued
from .choices import JobState
from .filters import filter_jobs
from .forms import DataVolumeForm, LaunchForm
from .models import DataVolume, Endpoint, Job, JobTemplate
from .routes import endpoint_host, label_of_host

FORM_FIELDS = {
    "image": "image",
    "command": "command",
    "name": "name",
    "gpus": "gpus",
    "data_volume": "data_volume",
    "volumes.workspace_gib": "workspace_gib",
}


def spec_errors(form, exc):
    """Service errors keyed by spec paths, put on the matching form field or above the form."""
    by_path = exc.error_dict if hasattr(exc, "error_dict") else {"__all__": exc.error_list}
    for path, errors in by_path.items():
        field = FORM_FIELDS.get(path)
        if field is None and path.endswith(".gpus"):
            field = "gpus"
        if field not in form.fields:
            field = "spec" if "spec" in form.fields else None
        for error in errors:
            for message in error.messages:
                # A quota refusal says in words what it counts; a spec path would be noise.
                plain = (
                    field in FORM_FIELDS.values() or path == "__all__" or error.code == "over_quota"
                )
                form.add_error(field, message if plain else f"{path}: {message}")


# libyaml's emitter where PyYAML has it (its wheels do): the same text in a fifth of the time,
# on the page every job's owner opens.
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def manifests_yaml(objects):
    return yaml.dump_all(objects, Dumper=_DUMPER, sort_keys=False)


@login_required
def job_list(request, slug):
    tenant = get_tenant_for_user(request.user, slug)
    jobs, filters = filter_jobs(
        Job.objects.filter(tenant=tenant).select_related(
            "tenant", "owner", "template_version__template__tenant"
        ),
        request.GET,
    )
    page = Paginator(jobs, 25).get_page(request.GET.get("page"))
    return render(
        request,
        "jobs/job_list.html",
        {
            "tenant": tenant,
            "page": page,
            "filters": filters,
            "states": JobState.choices,
            "free_gpus": free_gpus(tenant),
            "may_launch": has_role(tenant.role_of(request.user), Role.RESEARCHER),
        },
    )


def _pickable(tenant):
    """The templates a launch in `tenant` can name: its own, and the global ones none of its
    own replaces (a launch by name takes the tenant's), each marked when it replaces one."""
    templates = JobTemplate.objects.for_tenant(tenant).select_related("tenant")
    templates = list(templates.annotate(latest_version=Max("versions__version")))
    global_names = {t.name for t in templates if t.tenant_id is None}
    own = {t.name for t in templates if t.tenant_id is not None}
    for template in templates:
        template.replaces_global = template.tenant_id is not None and template.name in global_names
    return [t for t in templates if t.tenant_id is not None or t.name not in own]


def _pick(request, tenant, status=200):
    context = {"tenant": tenant, "templates": _pickable(tenant)}
    return render(request, "jobs/launch_pick.html", context, status=status)


@login_required
def launch(request, slug):
    tenant = get_tenant_for_user(request.user, slug, role=Role.RESEARCHER)
    params = request.POST if request.method == "POST" else request.GET
    if not params.get("template"):
        return _pick(request, tenant)
    try:
        version = services.template_version(tenant, params["template"], params.get("version"))
    except ValidationError as exc:  # a link to a template retired or gone: pick another
        messages.error(request, " ".join(exc.messages))
        return _pick(request, tenant, status=404)
    form = LaunchForm(request.POST or None, version=version, tenant=tenant)
    context = {"tenant": tenant, "form": form, "version": version}
    if request.method == "POST" and form.is_valid():
        overrides, name = form.overrides(), form.cleaned_data["name"]
        volume = form.cleaned_data.get("data_volume")
        try:
            if "preview" in request.POST:
                context["preview"] = preview(tenant, request.user, version, overrides, name, volume)
            else:
                job, warnings = services.launch_job(
                    tenant,
                    request.user,
                    actor=request.user,
                    template_version=version,
                    overrides=overrides,
                    name=name,
                    data_volume=volume,
                )
                for warning in warnings:
                    messages.warning(request, warning)
                messages.success(request, f"Job {job.name} launched ({job.get_state_display()}).")
                return redirect(job)
        except ValidationError as exc:
            spec_errors(form, exc)
    return render(request, "jobs/launch.html", context)


def preview(tenant, user, version, overrides, name, volume):
    previewed = services.preview_launch(
        tenant, user, template_version=version, overrides=overrides, name=name, data_volume=volume
    )
    return {**previewed, "yaml": manifests_yaml(previewed["objects"])}


def _closed_endpoint(user, label):
    """The endpoint at this host label, if the user may see its job's tenant; else None."""
    if not label or not user.is_authenticated:
        return None
    return (
        Endpoint.objects.select_related("job__tenant")
        .filter(host_label=label, job__in=Job.objects.for_user(user))
        .first()
    )


def _why_closed(endpoint, user):
    """(what happened, what to do, whether it is open after all) for an endpoint the router
    had no route for."""
    job = endpoint.job
    if job.delete_requested:
        return f"Its job {job.name} was deleted, and its endpoints with it.", "", False
    if job.is_finished:
        return (
            f"It closed when its job {job.name} ended ({job.get_state_display().lower()}).",
            "Relaunch the job from its page to open the endpoint again.",
            False,
        )
    if job.cancel_requested:
        return f"Its job {job.name} is being cancelled, and its endpoints close with it.", "", False
    if not endpoint.routed:
        return (
            "It is reached inside the cluster, from another job of the tenant, not from a browser.",
            "",
            False,
        )
    if endpoint.closed_by_admin:
        return (
            "A platform admin closed it.",
            "It stays closed until a platform admin opens it again.",
            False,
        )
    if endpoint.reclaimed_at or endpoint.is_expired:
        if may_change(user, get_job_for_user(user, job.tenant.slug, job.name)):
            return "Its time ran out.", "Extend it from the job's page to open it again.", False
        todo = "The job's owner or a tenant admin can extend it from the job's page."
        return "Its time ran out.", todo, False
    if job.state != JobState.RUNNING:
        return (
            f"Its job {job.name} is not running yet ({job.get_state_display().lower()}): "
            "the endpoint answers once it runs.",
            "",
            False,
        )
    return (
        "It is open: the router had no route for it yet when you asked (a route takes up to a "
        "second after the launch).",
        "Open it again.",
        True,
    )


@require_safe  # the router redirects GET and HEAD only: a form's body never comes here
@never_cache  # it answers each user differently
def endpoint_closed(request):
    """Where the router sends an endpoint host no route serves: its job ended, its time ran
    out, or it never existed. Who may see the job learns which and what to do; anyone else
    only that nothing is open there (the same answer for a host that never existed)."""
    label = label_of_host(request.GET.get("host", ""))
    endpoint = _closed_endpoint(request.user, label)
    what, todo, is_open = _why_closed(endpoint, request.user) if endpoint else ("", "", False)
    status = 200 if is_open else 404
    if "text/html" not in request.headers.get("Accept", ""):
        detail = NOTHING_OPEN
        if endpoint:
            detail = f"The endpoint {endpoint.name} of job {endpoint.job.name}: {what} {todo}"
        return JsonResponse({"detail": detail.strip()}, status=status)
    context = {
        "host": endpoint_host(label) if label else "",
        "endpoint": endpoint,
        "what": what,
        "todo": todo,
        "is_open": is_open,
    }
    return render(request, "jobs/endpoint_closed.html", context, status=status)


NOTHING_OPEN = (
    "No endpoint is open at this address. Job endpoints close when their job ends or their "
    "time runs out; the job's page in the portal lists its endpoints."
)


@login_required
def job_detail(request, slug, name):
    job = get_job_for_user(request.user, slug, name)
    prefetch_related_objects([job], "endpoints")  # the page lists them, its manifests hold them
    manifests = services.job_manifests(job)
    return render(
        request,
        "jobs/job_detail.html",
        {
            "job": job,
            "tenant": job.tenant,
            "status": job_status(job),
            "manifests": manifests_yaml(manifests),
            "manifest_count": len(manifests),
            "may_change": may_change(request.user, job),
            "may_launch": has_role(job.tenant.role_of(request.user), Role.RESEARCHER),
        },
    )


@login_required
def job_logs(request, slug, name):
    """The job's pods (task, replica, node, how each ended, their Events) and a log viewer."""
    job = get_job_for_user(request.user, slug, name)
    context = {"job": job, "tenant": job.tenant}
    try:
        pods = context["pods"] = logs.pods_of(job)
    except K8sError as exc:
        context["unanswered"] = exc.message
        return render(request, "jobs/job_logs.html", context, status=503)
    if pods:  # some replicas may have none (yet, or no longer)
        context["podless"] = logs.replicas_without_pods(job, pods)
    return render(request, "jobs/job_logs.html", context)


@login_required
def pod_log(request, slug, name, pod):
    """One pod's log as text: `tail=N` its last lines, `after=CURSOR` those since the last read,
    `download=1` the whole file."""
    job = get_job_for_user(request.user, slug, name)
    try:
        return logs.log_response(job, pod, request.GET)
    except ValidationError as exc:
        text = "".join(f"{field}: {' '.join(m)}\n" for field, m in exc.message_dict.items())
        return HttpResponse(text, status=400, content_type="text/plain; charset=utf-8")


def job_status(job):
    """What the job's page shows of its progress, polled every few seconds while the job may
    change (`Job.may_change`). The tenant's free GPUs and storage are read only for a job
    waiting in its queue, the one state that shows them."""
    status = {"events": job.events.all()[:20], "addresses": job_addresses(job)}
    if position := queue_position(job):
        status |= {"position": position, "short": why_queued(job)}
    if job.state in (JobState.QUEUED, JobState.PENDING):  # as the cluster's nodes are now
        status["never"] = services.scheduling_warnings(job.job_spec())
    return status


@polled
@login_required
def job_status_partial(request, slug, name):
    job = get_job_for_user(request.user, slug, name)
    return render(request, "jobs/job_status.html", {"job": job, "status": job_status(job)})


@login_required
@require_POST
def job_cancel(request, slug, name):
    job = services.cancel_job(
        get_job_for_user(request.user, slug, name, write=True), actor=request.user
    )
    messages.success(request, f"Cancelling {job.name}.")
    return redirect(job)


@login_required
@require_POST
def job_relaunch(request, slug, name):
    job = get_job_for_user(request.user, slug, name)
    get_tenant_for_user(request.user, slug, role=Role.RESEARCHER)
    try:
        new, warnings = services.relaunch_job(job, actor=request.user)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect(job)
    messages.success(request, f"Relaunched {job.name} as {new.name}.")
    return redirect(new)


@login_required
@require_POST
def job_delete(request, slug, name):
    job = get_job_for_user(request.user, slug, name, write=True)
    try:
        services.delete_job(job, actor=request.user, delete_data="delete_data" in request.POST)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect(job)
    messages.success(request, f"Deleting {job.name} and everything it owns.")
    return redirect("jobs:list", slug=slug)


@login_required
def volume_list(request, slug):
    tenant = get_tenant_for_user(request.user, slug)
    form = DataVolumeForm(request.POST or None)
    if request.method == "POST":
        get_tenant_for_user(request.user, slug, role=Role.RESEARCHER)
        if form.is_valid():
            try:
                services.create_data_volume(tenant, actor=request.user, **form.cleaned_data)
            except ValidationError as exc:
                apply_errors(form, exc)
            else:
                messages.success(request, f"Data volume {form.cleaned_data['name']} created.")
                return redirect("jobs:volumes", slug=slug)
    # Each job's link names its tenant: read with it (one query, not one per job ever
    # attached), without the specs the page does not show.
    users = Job.objects.select_related("tenant").only(
        "name", "data_volume", "tenant__slug", "tenant"
    )
    volumes = DataVolume.objects.filter(tenant=tenant).select_related("created_by")
    volumes = list(volumes.prefetch_related(Prefetch("jobs", users)))
    for volume in volumes:
        volume.tenant = tenant  # read with the user's role
        volume.may_delete = may_delete_volume(request.user, volume)
    context = {
        "tenant": tenant,
        "volumes": volumes,
        "form": form,
        "may_write": has_role(tenant.role_of(request.user), Role.RESEARCHER),
    }
    return render(request, "jobs/volume_list.html", context)


@login_required
@require_POST
def volume_action(request, slug, volume_id):
    tenant = get_tenant_for_user(request.user, slug, role=Role.RESEARCHER)
    volume = get_object_or_404(DataVolume, tenant=tenant, pk=volume_id)
    try:
        if "delete" in request.POST:
            services.delete_data_volume(volume, actor=request.user)
            messages.success(request, f"Deleting data volume {volume.name}.")
        else:
            size = _whole_number(request.POST, "size_gib", "size in GiB", "500")
            services.expand_data_volume(volume, size_gib=size, actor=request.user)
            messages.success(request, f"{volume.name} grows to {size} GiB.")
    except ValidationError as exc:
        messages.error(request, f"{volume.name}: {' '.join(exc.messages)}")
    return redirect("jobs:volumes", slug=slug)


def _whole_number(form, field, what, example):
    """A whole number the form sent, or a ValidationError that says what to give."""
    value = whole_number(form.get(field))
    if value is None:
        raise ValidationError(f"Give the {what} as a whole number, for example {example}.")
    return value


@login_required
@require_POST
def endpoint_extend(request, slug, name, endpoint):
    job = get_job_for_user(request.user, slug, name)
    row = get_object_or_404(job.endpoints, name=endpoint)
    try:
        hours = _whole_number(request.POST, "hours", "hours", "8")
        row = endpoints.extend(row, hours=hours, actor=request.user)
    except ValidationError as exc:
        messages.error(request, f"{row.name}: {' '.join(exc.messages)}")
    else:
        messages.success(request, f"{row.name} now expires {row.expires_at:%Y-%m-%d %H:%M} UTC.")
    return redirect(job)


@login_required
def expiry_board(request):
    require_platform_admin(request.user)
    if request.method == "POST":
        row = get_object_or_404(
            Endpoint.objects.select_related("job__tenant"),
            pk=whole_number(request.POST.get("endpoint")),
        )
        try:
            if "reclaim" in request.POST:
                endpoints.reclaim_now(row, actor=request.user)
                messages.success(request, f"Reclaimed {row}.")
            else:
                hours = _whole_number(request.POST, "hours", "hours", "8")
                endpoints.extend(row, hours=hours, actor=request.user)
                messages.success(request, f"Extended {row}.")
        except ValidationError as exc:
            messages.error(request, f"{row}: {' '.join(exc.messages)}")
        return redirect("jobs:expiry")
    expiring, expired = endpoints.expiry_board()
    return render(request, "jobs/expiry_board.html", {"expiring": expiring, "expired": expired})
