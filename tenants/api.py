from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, permissions, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from core.fields import ID_REGEX, NAME_REGEX, ETagged, LocationOnCreate, etagged_schema

from . import services
from .access import get_tenant_for_user, require_platform_admin
from .choices import Role
from .filters import filter_audit
from .models import AuditEvent, Membership, Tenant
from .serializers import AuditEventSerializer, MembershipSerializer, TenantSerializer


@etagged_schema
class TenantViewSet(
    ETagged,
    LocationOnCreate,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    """Tenants with their quota, queue and sync status. Writes are for platform admins."""

    lookup_value_regex = NAME_REGEX
    serializer_class = TenantSerializer
    lookup_field = "slug"

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        # Writes are for platform admins, decided before any input is read (a tenant admin's
        # PATCH learns nothing from its validation); outsiders get 404 for a tenant first.
        if request.method not in permissions.SAFE_METHODS:
            if "slug" in kwargs:
                self.get_object()
            require_platform_admin(request.user)

    def get_queryset(self):
        return Tenant.objects.for_user(self.request.user).prefetch_related("memberships")

    def get_object(self):
        return get_tenant_for_user(self.request.user, self.kwargs["slug"])

    def perform_create(self, serializer):
        require_platform_admin(self.request.user)
        serializer.instance = services.create_tenant(
            actor=self.request.user, **serializer.validated_data
        )

    def perform_update(self, serializer):
        require_platform_admin(self.request.user)
        serializer.instance = services.update_tenant(
            serializer.instance,
            actor=self.request.user,
            if_match=self.if_match(),
            **serializer.validated_data,
        )

    def version_values(self, tenant):
        return services.tenant_snapshot(tenant)

    @extend_schema(request=None, responses=TenantSerializer)
    @action(detail=True, methods=["post"])
    def archive(self, request, slug=None):
        tenant = self.get_object()
        require_platform_admin(request.user)
        tenant = services.archive_tenant(tenant, actor=request.user)
        return Response(TenantSerializer(tenant).data)


class MembershipViewSet(viewsets.ModelViewSet):
    """Members of one tenant: readable by its members, managed by its admins."""

    lookup_value_regex = ID_REGEX
    serializer_class = MembershipSerializer
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        # The tenant is resolved before any input is read: 404 for outsiders, 403 for too low a
        # role, whatever the request body says.
        write = request.method not in permissions.SAFE_METHODS
        self.tenant = get_tenant_for_user(
            request.user, kwargs["tenant_slug"], role=Role.ADMIN if write else Role.VIEWER
        )

    def get_queryset(self):
        return Membership.objects.filter(tenant=self.tenant).select_related("user", "tenant")

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = services.add_member(
            self.tenant, data["user"], data["role"], actor=self.request.user
        )

    def perform_update(self, serializer):
        role = serializer.validated_data.get("role", serializer.instance.role)
        serializer.instance = services.change_member_role(
            serializer.instance, role, actor=self.request.user
        )

    def perform_destroy(self, instance):
        services.remove_member(instance, actor=self.request.user)


@extend_schema(
    parameters=[
        OpenApiParameter("tenant", str),
        OpenApiParameter("actor", str),
        OpenApiParameter("action", str),
        OpenApiParameter("since", str, description="YYYY-MM-DD"),
    ]
)
class AuditEventViewSet(viewsets.ReadOnlyModelViewSet):
    """The audit log, for platform admins."""

    lookup_value_regex = ID_REGEX
    serializer_class = AuditEventSerializer

    def get_queryset(self):
        require_platform_admin(self.request.user)
        events, _ = filter_audit(
            AuditEvent.objects.select_related("tenant"), self.request.query_params
        )
        return events
