from dataclasses import asdict

from rest_framework import serializers

from core.fields import FixedOnceMade, NoUnknownFields, SlugRelatedField
from networking.addresses import job_addresses

from .admission import queue_position
from .models import DataVolume, Endpoint, Job, JobEvent, JobTemplate, JobTemplateVersion
from .spec import MAX_SOURCE_CHARS, OVERRIDABLE


class JobEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = JobEvent
        fields = ["created_at", "kind", "message"]


class PodEventSerializer(serializers.Serializer):
    type = serializers.CharField()
    reason = serializers.CharField()
    message = serializers.CharField()
    count = serializers.IntegerField()
    last_seen = serializers.DateTimeField(allow_null=True)


class ContainerSerializer(serializers.Serializer):
    name = serializers.CharField()
    state = serializers.CharField()
    reason = serializers.CharField()
    exit_code = serializers.IntegerField(allow_null=True)
    restarts = serializers.IntegerField()


class PodSerializer(serializers.Serializer):
    """A job's pod as k8s_adapters.pods reads it (read-only)."""

    name = serializers.CharField()
    task = serializers.CharField()
    index = serializers.IntegerField()
    phase = serializers.CharField()
    node = serializers.CharField()
    ip = serializers.CharField()
    containers = ContainerSerializer(many=True)
    events = PodEventSerializer(many=True)


class EndpointSerializer(serializers.ModelSerializer):
    url = serializers.CharField(read_only=True)
    expired = serializers.BooleanField(source="is_expired", read_only=True)
    closed = serializers.BooleanField(
        source="is_closed", read_only=True, help_text="the job has ended: no routes, no extending"
    )

    class Meta:
        model = Endpoint
        fields = [
            "name",
            "task",
            "container_port",
            "protocol",
            "mode",
            "private",
            "url",
            "expires_at",
            "expired",
            "closed",
            "reclaimed_at",
            "closed_by_admin",
            "observed",
        ]
        read_only_fields = fields


class BoardEndpointSerializer(EndpointSerializer):
    """An endpoint on the platform admins' expiry board: with its job, tenant and owner."""

    id = serializers.IntegerField(read_only=True)
    job = serializers.CharField(source="job.name", read_only=True)
    tenant = serializers.CharField(source="job.tenant.slug", read_only=True)
    owner = serializers.CharField(source="job.owner.username", read_only=True)

    class Meta(EndpointSerializer.Meta):
        fields = ["id", "tenant", "job", "owner", *EndpointSerializer.Meta.fields]
        read_only_fields = fields


class PreviewSerializer(serializers.Serializer):
    objects = serializers.ListField(
        child=serializers.DictField(), help_text="what the launch would apply, in order"
    )
    gpus = serializers.IntegerField()
    warnings = serializers.ListField(child=serializers.CharField())


class ExtendSerializer(NoUnknownFields, serializers.Serializer):
    hours = serializers.IntegerField(min_value=1)


class JobSerializer(serializers.ModelSerializer):
    tenant = SlugRelatedField(slug_field="slug", read_only=True)
    owner = SlugRelatedField(slug_field="username", read_only=True)
    template = serializers.SerializerMethodField()
    data_volume = SlugRelatedField(slug_field="name", read_only=True)
    queue_position = serializers.SerializerMethodField()
    endpoints = EndpointSerializer(many=True, read_only=True)
    network_addresses = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = [
            "endpoints",
            "network_addresses",
            "name",
            "tenant",
            "owner",
            "template",
            "state",
            "message",
            "phase",
            "counts",
            "pending_reason",
            "sync_state",
            "sync_message",
            "queue_position",
            "gpus",
            "data_volume",
            "cancel_requested",
            "delete_requested",
            "spec",
            "created_at",
            "queued_at",
            "volumes_ahead_at",
            "submitted_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields

    def get_template(self, job) -> str | None:
        return str(job.template_version) if job.template_version_id else None

    # A page of jobs reads these for the whole page at once (JobViewSet.list): `positions` and
    # `addresses` in the context, by job pk; one job reads its own.

    def get_queue_position(self, job) -> int | None:
        positions = self.context.get("positions")
        return positions.get(job.pk) if positions is not None else queue_position(job)

    def get_network_addresses(self, job) -> dict:
        """Per pod, its secondary interfaces and addresses from Multus, or why it has none."""
        addresses = self.context.get("addresses")
        found = addresses[job.pk] if addresses is not None else job_addresses(job)
        return {"pods": [asdict(p) for p in found.pods], "unavailable": found.unavailable}


class LaunchSerializer(NoUnknownFields, serializers.Serializer):
    """Launch from a template version (with overrides) or from a full spec."""

    template = serializers.CharField(
        required=False,
        help_text="Template name; global or the "
        "tenant's own. Its latest version unless `version` is set.",
    )
    version = serializers.IntegerField(required=False, min_value=1)
    spec = serializers.DictField(required=False, help_text="A full spec, as a template holds.")
    name = serializers.CharField(required=False, allow_blank=True, max_length=48)
    image = serializers.CharField(required=False)
    command = serializers.JSONField(required=False, help_text="argv list or one command line")
    gpus = serializers.IntegerField(required=False, min_value=0, max_value=64)
    replicas = serializers.DictField(child=serializers.IntegerField(min_value=1), required=False)
    workspace_gib = serializers.IntegerField(required=False, min_value=1)
    data_volume = serializers.CharField(required=False, allow_blank=True)

    def validate(self, attrs):
        if bool(attrs.get("template")) == bool(attrs.get("spec")):
            raise serializers.ValidationError("Give either a template or a spec.")
        if attrs.get("spec"):  # a spec says all of it: an override beside it would be dropped
            extra = [k for k in (*OVERRIDABLE, "version") if k in attrs and k != "data_volume"]
            if extra:
                said = "Not with a spec: write it into the spec (an override changes a template)."
                raise serializers.ValidationError({k: [said] for k in extra})
        return attrs


class TemplateVersionSerializer(serializers.ModelSerializer):
    class Meta:
        model = JobTemplateVersion
        fields = ["id", "version", "spec", "source", "overridable", "created_at"]


class TemplateSerializer(serializers.ModelSerializer):
    tenant = SlugRelatedField(slug_field="slug", read_only=True)
    latest = TemplateVersionSerializer(read_only=True)

    class Meta:
        model = JobTemplate
        fields = ["id", "name", "tenant", "description", "latest", "created_at", "retired_at"]


class TemplateWriteSerializer(NoUnknownFields, serializers.Serializer):
    name = serializers.CharField(max_length=50)
    tenant = serializers.CharField(
        required=False, allow_blank=True, help_text="Tenant slug; empty for a global template."
    )
    description = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    spec = serializers.DictField(required=False, help_text="The spec; or give `source`.")
    source = serializers.CharField(
        required=False,
        max_length=MAX_SOURCE_CHARS,
        trim_whitespace=False,  # kept as written
        help_text="The spec as YAML text, kept as written (comments and all); or give `spec`.",
    )
    overridable = serializers.ListField(child=serializers.CharField(), required=False)

    def validate(self, attrs):
        if ("spec" in attrs) == bool(attrs.get("source")):
            raise serializers.ValidationError(
                {"spec": "Give the spec either as `spec` (a mapping) or as `source` (YAML text)."}
            )
        return attrs


class DataVolumeSerializer(FixedOnceMade, NoUnknownFields, serializers.ModelSerializer):
    fixed = ("name", "storage_class")  # a volume only grows

    class Meta:
        model = DataVolume
        fields = [
            "id",
            "name",
            "size_gib",
            "storage_class",
            "delete_requested",
            "sync_state",
            "sync_message",
            "created_at",
        ]
        read_only_fields = ["delete_requested", "sync_state", "sync_message", "created_at"]
