from django.contrib.auth import get_user_model
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from core.fields import (
    NAME_REGEX,
    ETagged,
    FixedOnceMade,
    NoUnknownFields,
    SlugRelatedField,
    etagged_schema,
)
from tenants.access import get_tenant_for_user, require_platform_admin
from tenants.models import Tenant

from . import services
from .conflicts import find, utilization
from .models import POOL_FIELDS, IPPool, IPReservation


class PoolSerializer(FixedOnceMade, NoUnknownFields, serializers.ModelSerializer):
    fixed = ("name",)  # it names the pool's networks in every tenant
    tenants = SlugRelatedField(
        slug_field="slug", many=True, required=False, queryset=Tenant.objects.active()
    )
    exclusions = serializers.ListField(
        child=serializers.CharField(max_length=100, allow_blank=True), required=False
    )
    usage = serializers.SerializerMethodField()
    conflicts = serializers.SerializerMethodField()
    warnings = serializers.SerializerMethodField()

    class Meta:
        model = IPPool
        fields = [
            *POOL_FIELDS,
            "tenants",
            "usage",
            "conflicts",
            "warnings",
            "observed_allocations",
            "observed_at",
            "sync_state",
            "sync_message",
        ]
        read_only_fields = ["observed_allocations", "observed_at", "sync_state", "sync_message"]

    def get_usage(self, pool) -> dict:
        return utilization(pool, len(pool.reservations.all()))

    def get_warnings(self, pool) -> list[str]:
        return pool.warnings()

    def get_conflicts(self, pool) -> list[dict]:
        request = self.context.get("request")
        if request is not None and not request.user.is_staff:
            return []  # for platform admins only (see to_representation)
        if "all_pools" not in self.context:  # read once for a whole page
            self.context["all_pools"] = list(IPPool.objects.all())
        reservations = [(r.address, r.owner.username) for r in pool.reservations.all()]
        return [c.__dict__ for c in find(pool, reservations, self.context["all_pools"])]

    def to_representation(self, pool):
        """Members of a tenant see a pool open to it, not who else uses it: the other tenants,
        Whereabouts' allocations (pods of other namespaces), reservation conflicts (their
        owners) and sync errors are for platform admins."""
        data = super().to_representation(pool)
        request = self.context.get("request")
        if request is not None and not request.user.is_staff:
            if "visible" not in self.context:  # read once for a whole page
                mine = Tenant.objects.for_user(request.user).values_list("slug", flat=True)
                self.context["visible"] = set(mine)
            visible = self.context["visible"]
            data["tenants"] = [slug for slug in data["tenants"] if slug in visible]
            data["observed_allocations"] = type(data["observed_allocations"])()
            data["conflicts"] = []
            # Errors applying its networks name other tenants' namespaces.
            data["sync_message"] = ""
        return data


class ReservationSerializer(NoUnknownFields, serializers.ModelSerializer):
    ip = serializers.IPAddressField(required=False, allow_null=True)
    tenant = SlugRelatedField(slug_field="slug", queryset=Tenant.objects.active())
    owner = SlugRelatedField(slug_field="username", queryset=get_user_model().objects.all())
    job = SlugRelatedField(slug_field="name", read_only=True)
    # As the pool page: an address reserved by hand is for its owner's jobs, and only a pinned
    # one is ever taken by a launch (one not pinned would only keep the address from everyone).
    pinned = serializers.BooleanField(
        default=True, help_text="Kept for the owner's jobs, run after run (default true)."
    )

    class Meta:
        model = IPReservation
        fields = ["id", "ip", "tenant", "owner", "job", "pinned", "note", "created_at"]


class ReleaseAllocationSerializer(NoUnknownFields, serializers.Serializer):
    address = serializers.IPAddressField(help_text="The address Whereabouts allocated.")
    podref = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=317,
        help_text="'<namespace>/<pod>': release only while the address still belongs to it.",
    )


# How a refused deletion answers: in use (409), deleted meanwhile (404), cluster silent (503).
DELETE_REFUSALS = {
    "gone": status.HTTP_404_NOT_FOUND,
    "unavailable": status.HTTP_503_SERVICE_UNAVAILABLE,
}


@etagged_schema
class PoolViewSet(
    ETagged,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """L2 IP pools (platform admins). Members of a tenant see the pools open to it."""

    lookup_value_regex = NAME_REGEX
    serializer_class = PoolSerializer
    lookup_field = "name"

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        # Writes are decided before any input is read: an outsider learns nothing from the
        # validation of what they sent (which tenant slugs exist, for one).
        if request.method not in permissions.SAFE_METHODS:
            if "name" in kwargs:
                self.get_object()  # 404 for a pool the user may not see
            require_platform_admin(request.user)

    def get_queryset(self):
        pools = IPPool.objects.with_reservations()
        if self.request.user.is_staff:
            return pools
        return pools.filter(tenants__in=Tenant.objects.for_user(self.request.user)).distinct()

    def perform_create(self, serializer):
        require_platform_admin(self.request.user)
        data = dict(serializer.validated_data)
        serializer.instance = services.create_pool(
            actor=self.request.user, tenants=data.pop("tenants", []), **data
        )

    def perform_update(self, serializer):
        require_platform_admin(self.request.user)
        data = dict(serializer.validated_data)
        serializer.instance = services.update_pool(
            serializer.instance,
            actor=self.request.user,
            tenants=data.pop("tenants", None),
            if_match=self.if_match(),
            **data,
        )

    def version_values(self, pool):
        return services.snapshot(pool)

    @extend_schema(responses={204: None})
    def destroy(self, request, *args, **kwargs):
        """Delete a pool nothing uses any more (409, naming what still uses it, otherwise);
        its networks leave every tenant's namespace."""
        pool = self.get_object()
        try:
            services.delete_pool(pool, actor=request.user)
        except services.ValidationError as exc:
            code = exc.error_list[0].code or "in_use"
            return Response(
                {"detail": exc.messages[0], "code": code, "errors": {}},
                status=DELETE_REFUSALS.get(code, status.HTTP_409_CONFLICT),
            )
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=ReservationSerializer, responses={201: ReservationSerializer})
    @action(detail=True, methods=["get", "post"])
    def reservations(self, request, name=None):
        pool = self.get_object()
        require_platform_admin(request.user)
        if request.method == "GET":
            return Response(ReservationSerializer(pool.reservations.all(), many=True).data)
        serializer = ReservationSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        get_tenant_for_user(request.user, data["tenant"].slug)
        try:
            reservation = services.reserve_address(
                pool,
                tenant=data["tenant"],
                owner=data["owner"],
                actor=request.user,
                address=data.get("ip"),
                pinned=data["pinned"],
                note=data.get("note", ""),
            )
        except services.ValidationError as exc:
            listed = getattr(exc, "error_dict", {"": getattr(exc, "error_list", [])})
            codes = {e.code for errors in listed.values() for e in errors}
            if "gone" in codes:  # deleted between this request's read of it and its lock
                raise NotFound(exc.messages[0]) from exc
            if codes & {"pool_full", "taken"}:
                return Response(
                    {"detail": exc.messages[0], "code": "conflict", "errors": {}},
                    status=status.HTTP_409_CONFLICT,
                )
            raise
        return Response(ReservationSerializer(reservation).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={204: None})
    @action(detail=True, methods=["delete"], url_path=r"reservations/(?P<reservation_id>\d+)")
    def release(self, request, name=None, reservation_id=None):
        pool = self.get_object()
        require_platform_admin(request.user)
        reservation = get_object_or_404(pool.reservations, pk=reservation_id)
        try:
            services.release_reservation(reservation, actor=request.user)
        except services.ValidationError as exc:
            if exc.code == "gone":  # released, or its pool deleted, by another request
                raise NotFound(exc.messages[0]) from exc
            return Response(
                {"detail": exc.messages[0], "code": "conflict", "errors": {}},
                status=status.HTTP_409_CONFLICT,
            )
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=ReleaseAllocationSerializer, responses={202: None})
    @action(detail=True, methods=["post"], url_path="release-allocation")
    def release_allocation(self, request, name=None):
        """Remove one of Whereabouts' allocations (a stale one, or one on a reserved address);
        done by a worker, never undoing an allocation Whereabouts makes meanwhile."""
        pool = self.get_object()
        require_platform_admin(request.user)
        serializer = ReleaseAllocationSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        services.release_allocation(
            pool,
            serializer.validated_data["address"],
            actor=request.user,
            podref=serializer.validated_data.get("podref") or None,
        )
        return Response(status=status.HTTP_202_ACCEPTED)
