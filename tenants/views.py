from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from core.polling import polled

from . import services
from .access import (
    get_membership_for_user,
    get_tenant_for_user,
    has_role,
    require_platform_admin,
)
from .choices import Role
from .filters import filter_audit
from .forms import AddMemberForm, RoleForm, TenantForm
from .models import AuditEvent, Tenant


def apply_errors(form, exc):
    """Put a service's ValidationError on the form, keyed by field where it says so."""
    if hasattr(exc, "error_dict"):
        for field, errors in exc.error_dict.items():
            form.add_error(field if field in form.fields else None, errors)
    else:
        form.add_error(None, exc)


@login_required
def home(request):
    tenants = list(Tenant.objects.for_user(request.user).active().with_role_of(request.user))
    if not tenants and not request.user.is_staff:
        return render(request, "tenants/no_tenant.html")
    for tenant in tenants:  # viewers get no Launch link that ends in a 403
        tenant.may_launch = has_role(tenant.role_of(request.user), Role.RESEARCHER)
    return render(request, "tenants/home.html", {"tenants": tenants})


@login_required
def tenant_list(request):
    tenants = Tenant.objects.for_user(request.user)
    if request.GET.get("state") in {"active", "archived"}:
        tenants = tenants.filter(state=request.GET["state"])
    return render(request, "tenants/tenant_list.html", {"tenants": tenants})


@login_required
def tenant_create(request):
    require_platform_admin(request.user)
    form = TenantForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            fields = {k: v for k, v in form.cleaned_data.items() if k != "shown"}
            tenant = services.create_tenant(actor=request.user, **fields)
        except ValidationError as exc:
            apply_errors(form, exc)
        else:
            messages.success(
                request, f"Tenant {tenant.slug} created; its namespace and queue are being set up."
            )
            return redirect(tenant)
    return render(request, "tenants/tenant_form.html", {"form": form})


@login_required
def tenant_edit(request, slug):
    tenant = get_tenant_for_user(request.user, slug)
    require_platform_admin(request.user)
    form = TenantForm(request.POST or None, instance=Tenant.objects.get(pk=tenant.pk))
    if request.method == "POST" and form.is_valid():
        try:
            changes, seen = form.changes()
            services.update_tenant(tenant, actor=request.user, seen=seen, **changes)
        except ValidationError as exc:
            apply_errors(form, exc)
        else:
            messages.success(request, f"Tenant {tenant.slug} updated.")
            return redirect(tenant)
    return render(request, "tenants/tenant_form.html", {"form": form, "tenant": tenant})


@login_required
def tenant_detail(request, slug):
    return _detail(request, get_tenant_for_user(request.user, slug), AddMemberForm())


def _detail(request, tenant, add_form, status=200):
    memberships = tenant.memberships.select_related("user").order_by("user__username")
    return render(
        request,
        "tenants/tenant_detail.html",
        {
            "tenant": tenant,
            "memberships": memberships,
            "role": tenant.role_of(request.user),
            "add_form": add_form,
            "roles": Role.choices,
            "resync_seconds": settings.RESYNC_INTERVAL,
        },
        status=status,
    )


@polled
@login_required
def tenant_sync(request, slug):
    tenant = get_tenant_for_user(request.user, slug)
    context = {"tenant": tenant, "resync_seconds": settings.RESYNC_INTERVAL}
    return render(request, "tenants/tenant_sync_row.html", context)


@login_required
@require_POST
def tenant_archive(request, slug):
    tenant = get_tenant_for_user(request.user, slug)
    require_platform_admin(request.user)
    try:
        services.archive_tenant(tenant, actor=request.user)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(
            request,
            f"Tenant {tenant.slug} archived; its namespace and queue are "
            "being removed. The record is kept.",
        )
    return redirect(tenant)


@login_required
@require_POST
def member_add(request, slug):
    tenant = get_tenant_for_user(request.user, slug, role=Role.ADMIN)
    form = AddMemberForm(request.POST)
    if form.is_valid():
        try:
            membership = services.add_member(
                tenant, form.cleaned_data["username"], form.cleaned_data["role"], actor=request.user
            )
        except ValidationError as exc:
            apply_errors(form, exc)
        else:
            messages.success(
                request,
                f"{membership.user.username} added to {slug} as {membership.get_role_display()}.",
            )
            return redirect(tenant)
    return _detail(request, tenant, form, status=400)  # what was typed stays, with the errors


@login_required
@require_POST
def member_update(request, slug, membership_id):
    membership = get_membership_for_user(request.user, slug, membership_id)
    try:
        if "remove" in request.POST:
            services.remove_member(membership, actor=request.user)
            messages.success(request, f"{membership.user.username} removed from {slug}.")
        else:
            form = RoleForm(request.POST)
            if not form.is_valid():
                raise ValidationError("Choose a role: tenant admin, researcher or viewer.")
            changed = services.change_member_role(
                membership, form.cleaned_data["role"], actor=request.user
            )
            messages.success(
                request, f"{changed.user.username} is now {changed.get_role_display()} in {slug}."
            )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    return redirect("tenants:detail", slug=slug)


@login_required
def audit_log(request):
    require_platform_admin(request.user)
    events, filters = filter_audit(AuditEvent.objects.select_related("tenant"), request.GET)
    page = Paginator(events, 50).get_page(request.GET.get("page"))
    return render(
        request,
        "tenants/audit_log.html",
        {
            "page": page,
            "filters": filters,
            "tenants": Tenant.objects.all(),
            "actions": AuditEvent.objects.order_by().values_list("action", flat=True).distinct(),
        },
    )
