"""Job template pages: global templates (platform admins) and tenants' own (researchers)."""

import yaml
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count, Max
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from tenants.access import get_tenant_for_user, has_role, require_platform_admin
from tenants.choices import Role
from tenants.models import Tenant

from . import services
from . import spec as specs
from .forms import TemplateForm
from .models import JobTemplate
from .views import spec_errors


def _writable_tenants(user):
    return [
        t
        for t in Tenant.objects.for_user(user).active().with_role_of(user)
        if has_role(t.role_of(user), Role.RESEARCHER)
    ]


@login_required
def template_list(request):
    templates = JobTemplate.objects.for_user(request.user).select_related("tenant")
    templates = list(templates.annotate(latest_version=Max("versions__version")))
    return render(
        request,
        "jobs/template_list.html",
        {
            "templates": [t for t in templates if t.retired_at is None],
            "retired": [t for t in templates if t.retired_at is not None],
        },
    )


@login_required
@require_POST
def template_retire(request, template_id):
    """Retire a template (`retire=1`) or restore it (`retire=0`)."""
    template = get_object_or_404(JobTemplate.objects.for_user(request.user), pk=template_id)
    if request.POST.get("retire") not in ("0", "1"):
        messages.error(request, "Use the Retire or Restore button on this page.")
        return redirect("jobs:template", template_id=template.pk)
    retire = request.POST["retire"] == "1"
    template, changed = services.set_template_retired(template, retired=retire, actor=request.user)
    if not changed:
        messages.info(request, f"{template} was {'already' if retire else 'not'} retired.")
    elif retire:
        messages.success(
            request,
            f"Retired {template}: no launch offers it; jobs launched from it keep their version.",
        )
    else:
        messages.success(request, f"Restored {template}: launches offer it again.")
    return redirect("jobs:template", template_id=template.pk)


@login_required
def template_edit(request, template_id=None):
    template = None
    if template_id is not None:
        template = get_object_or_404(JobTemplate.objects.for_user(request.user), pk=template_id)
    initial = {}
    if template is not None:
        latest = template.latest
        initial = {
            "name": template.name,
            "description": template.description,
            "spec": latest.source
            or yaml.safe_dump(specs.in_reading_order(latest.spec), sort_keys=False),
            "overridable": latest.overridable,
        }
    may_change = template is None or services.may_add_version(template, request.user)
    may_save = may_change and (template is None or template.retired_at is None)
    if request.method == "POST" and not may_change:
        raise PermissionDenied(
            "Only its creator, a tenant admin or a platform admin adds versions."
        )
    if request.method == "POST" and not may_save:  # a page opened before it was retired
        messages.error(request, f"{template} is retired: restore it to add versions.")
        return redirect("jobs:template", template_id=template.pk)
    form = TemplateForm(request.POST or None, initial=initial)
    if template is not None:
        form.fields["name"].required = False  # a template's name never changes
    scopes = _writable_tenants(request.user)
    if request.method == "POST" and form.is_valid():
        scope = template.tenant.slug if template and template.tenant else request.POST.get("scope")
        try:
            tenant = _scope(request.user, scope if template is None or template.tenant else "")
            version = services.save_template(
                name=template.name if template else form.cleaned_data["name"],
                source=form.data["spec"],  # kept as written; parsed again by the service
                overridable=form.cleaned_data["overridable"],
                description=form.cleaned_data["description"],
                tenant=tenant,
                actor=request.user,
            )
        except ValidationError as exc:
            spec_errors(form, exc)
        else:
            messages.success(request, f"Saved {version}.")
            return redirect("jobs:template", template_id=version.template_id)
    return render(
        request,
        "jobs/template_form.html",
        {
            "form": form,
            "template": template,
            "scopes": scopes,
            "scope": request.POST.get("scope", request.GET.get("scope", "")),  # kept on errors
            "versions": template.versions.annotate(job_count=Count("jobs")) if template else [],
            "may_save": may_save,
            "may_change": may_change,
        },
    )


def _scope(user, slug):
    """The tenant a template is saved for; global templates are for platform admins."""
    if not slug:
        require_platform_admin(user)
        return None
    tenant = get_tenant_for_user(user, slug, role=Role.RESEARCHER)
    if tenant is None:
        raise PermissionDenied
    return tenant
