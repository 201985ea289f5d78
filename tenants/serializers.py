from django.contrib.auth import get_user_model
from rest_framework import serializers

from core.fields import NoUnknownFields, SlugRelatedField

from .choices import Role
from .constants import QUEUE_FIELDS, QUOTA_FIELDS
from .models import AuditEvent, Membership, Tenant


class TenantSerializer(NoUnknownFields, serializers.ModelSerializer):
    """Field types only: the invariants are the model's and the service's, as for the form."""

    namespace = serializers.CharField(read_only=True)
    queue = serializers.CharField(source="queue_name", read_only=True)

    class Meta:
        model = Tenant
        fields = [
            "slug",
            "display_name",
            "state",
            "namespace",
            "queue",
            *QUOTA_FIELDS,
            *QUEUE_FIELDS,
            "sync_state",
            "sync_message",
            "synced_at",
            "observed_usage",
            "created_at",
            "archived_at",
        ]
        read_only_fields = [
            "state",
            "sync_state",
            "sync_message",
            "synced_at",
            "observed_usage",
            "created_at",
            "archived_at",
        ]
        extra_kwargs = {"slug": {"validators": []}}  # uniqueness: model.full_clean in the service

    def get_fields(self):
        fields = super().get_fields()
        if self.instance is not None and not isinstance(self.instance, list):
            fields["slug"].read_only = True
        return fields


class MembershipSerializer(NoUnknownFields, serializers.ModelSerializer):
    username = SlugRelatedField(
        source="user",
        slug_field="username",
        queryset=get_user_model().objects.filter(is_active=True),
    )
    role = serializers.ChoiceField(choices=Role.choices)

    class Meta:
        model = Membership
        fields = ["id", "username", "role", "source", "created_at"]
        read_only_fields = ["source", "created_at"]

    def get_fields(self):
        fields = super().get_fields()
        if self.instance is not None:
            fields["username"].read_only = True
        return fields


class AuditEventSerializer(serializers.ModelSerializer):
    tenant = SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "created_at",
            "actor_name",
            "action",
            "tenant",
            "object_type",
            "object_repr",
            "before",
            "after",
        ]
