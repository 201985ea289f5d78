from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from tenants.access import require_platform_admin
from tenants.views import apply_errors

from . import services
from .conflicts import find, utilization
from .forms import PoolForm, ReserveForm
from .models import IPPool, IPReservation


def _pool(request, name):
    require_platform_admin(request.user)
    return get_object_or_404(IPPool, name=name)


def pool_facts(pool, all_pools):
    """Of a pool read `with_reservations`."""
    reservations = list(pool.reservations.all())
    return {
        "pool": pool,
        "usage": utilization(pool, len(reservations)),
        "reservations": reservations,
        "conflicts": find(pool, [(r.address, r.owner.username) for r in reservations], all_pools),
    }


@login_required
def pool_list(request):
    require_platform_admin(request.user)
    pools = list(IPPool.objects.with_reservations())
    return render(
        request, "networking/pool_list.html", {"rows": [pool_facts(p, pools) for p in pools]}
    )


@login_required
def pool_edit(request, name=None):
    require_platform_admin(request.user)
    pool = get_object_or_404(IPPool, name=name) if name else None
    form = PoolForm(request.POST or None, instance=pool)
    if request.method == "POST" and form.is_valid():
        data = dict(form.cleaned_data)
        data.pop("shown")
        tenants = data.pop("tenants")
        try:
            if pool:
                changes, seen = form.changes()
                if not changes:
                    messages.info(request, f"Nothing changed in pool {pool.name}.")
                    return redirect(pool)
                tenants = changes.pop("tenants", None)
                pool = services.update_pool(
                    pool, actor=request.user, tenants=tenants, seen=seen, **changes
                )
            else:
                pool = services.create_pool(actor=request.user, tenants=tenants, **data)
        except ValidationError as exc:
            apply_errors(form, exc)
        else:
            messages.success(request, f"Pool {pool.name} saved; its networks are being set up.")
            for warning in pool.warnings():
                messages.warning(request, warning)
            return redirect(pool)
    return render(request, "networking/pool_form.html", {"form": form, "pool": pool})


@login_required
def pool_detail(request, name):
    pool = _pool(request, name)
    form = ReserveForm(request.POST or None, pool=pool)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        owner = get_user_model().objects.filter(username=data["username"]).first()
        try:
            if owner is None:
                raise ValidationError({"username": f"No user '{data['username']}'."})
            reservation = services.reserve_address(
                pool,
                tenant=data["tenant"],
                owner=owner,
                actor=request.user,
                address=data["address"] or None,
                pinned=data["pinned"],
                note=data["note"],
            )
        except ValidationError as exc:
            apply_errors(form, exc)
        else:
            messages.success(request, f"Reserved {reservation.ip} for {owner.username}.")
            return redirect(pool)
    facts = pool_facts(IPPool.objects.with_reservations().get(pk=pool.pk), IPPool.objects.all())
    return render(request, "networking/pool_detail.html", {**facts, "form": form})


@login_required
@require_POST
def pool_delete(request, name):
    pool = _pool(request, name)
    try:
        services.delete_pool(pool, actor=request.user)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect("networking:list" if exc.error_list[0].code == "gone" else pool)
    messages.success(request, f"Pool {name} deleted; its networks are being removed.")
    return redirect("networking:list")


@login_required
@require_POST
def release_reservation(request, name, reservation_id):
    pool = _pool(request, name)
    reservation = get_object_or_404(IPReservation, pool=pool, pk=reservation_id)
    try:
        services.release_reservation(reservation, actor=request.user)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect(pool)
    messages.success(request, f"Released {reservation.ip}.")
    return redirect(pool)


@login_required
@require_POST
def release_whereabouts_allocation(request, name):
    pool = _pool(request, name)
    address = request.POST.get("address", "")
    podref = request.POST.get("podref") or None
    try:
        if podref is not None and "\x00" in podref:  # what the API's field refuses too
            raise ValidationError("The pod reference holds a NUL character; copy it again.")
        services.release_allocation(pool, address, actor=request.user, podref=podref)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"Releasing Whereabouts' allocation of {address}.")
    return redirect(pool)
