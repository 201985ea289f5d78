import json

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response

from core.fields import ID_REGEX, LocationOnCreate
from k8s_adapters.errors import K8sError
from networking.addresses import jobs_addresses
from tenants.access import get_tenant_for_user, require_platform_admin
from tenants.choices import Role

from . import endpoints, logs, services
from . import spec as specs
from .access import get_job_for_user
from .admission import queue_positions
from .filters import filter_jobs
from .models import DataVolume, Endpoint, Job, JobTemplate
from .serializers import (
    BoardEndpointSerializer,
    DataVolumeSerializer,
    EndpointSerializer,
    ExtendSerializer,
    JobEventSerializer,
    JobSerializer,
    LaunchSerializer,
    PodSerializer,
    PreviewSerializer,
    TemplateSerializer,
    TemplateWriteSerializer,
)


class PlainTextRenderer(BaseRenderer):
    """Logs are text: a client asking for text/plain gets them, and an error as JSON text."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data if isinstance(data, bytes | str) else json.dumps(data)


class TenantScoped:
    """Resolve the tenant from the URL before reading any input: 404 for outsiders, 403 for
    viewers writing."""

    write_role = Role.RESEARCHER

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        write = request.method not in permissions.SAFE_METHODS
        self.tenant = get_tenant_for_user(
            request.user, kwargs["tenant_slug"], role=self.write_role if write else Role.VIEWER
        )


class JobViewSet(
    LocationOnCreate,
    TenantScoped,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """A tenant's jobs: launch, watch, cancel, relaunch, delete."""

    serializer_class = JobSerializer
    lookup_field = "name"
    lookup_value_regex = "[-a-z0-9]+"
    filterset_fields = ["state"]

    def get_queryset(self):
        jobs = Job.objects.filter(tenant=self.tenant).select_related(
            "tenant", "owner", "template_version__template", "data_volume"
        )
        return filter_jobs(jobs, self.request.query_params)[0]

    def list(self, request, tenant_slug=None):
        """A page of jobs, with what each job would read alone (its endpoints, its place in the
        queue, its pods' addresses) read once for the whole page."""
        queryset = self.filter_queryset(self.get_queryset()).prefetch_related("endpoints")
        page = self.paginate_queryset(queryset)
        jobs = list(queryset if page is None else page)
        context = {
            **self.get_serializer_context(),
            "positions": queue_positions(jobs),
            "addresses": jobs_addresses(jobs),
        }
        data = self.get_serializer(jobs, many=True, context=context).data
        return Response(data) if page is None else self.get_paginated_response(data)

    def get_object(self):
        write = self.request.method not in permissions.SAFE_METHODS
        return get_job_for_user(
            self.request.user, self.tenant.slug, self.kwargs["name"], write=write
        )

    def _launch(self, request):
        """What a launch's body asks for, as `services.launch_job` (and its preview) take it."""
        launch = LaunchSerializer(data=request.data)
        launch.is_valid(raise_exception=True)
        data = launch.validated_data
        volume = None
        if data.get("data_volume"):
            volume = DataVolume.objects.filter(
                tenant=self.tenant, name=data["data_volume"], delete_requested=False
            ).first()
            if volume is None:
                said = f"No data volume named '{data['data_volume']}' in {self.tenant.slug}."
                raise ValidationError({"data_volume": [said]})
        asked = {"name": data.get("name", ""), "data_volume": volume}
        if data.get("spec"):
            return {**asked, "spec_data": data["spec"]}
        version = services.template_version(self.tenant, data["template"], data.get("version"))
        overrides = {k: data[k] for k in specs.OVERRIDABLE if k in data}
        return {**asked, "template_version": version, "overrides": overrides}

    @extend_schema(
        request=LaunchSerializer,
        responses={201: JobSerializer, 200: PreviewSerializer},
        parameters=[
            OpenApiParameter(
                "dry_run",
                OpenApiTypes.BOOL,
                description="true: create nothing; answer what the launch would create (the "
                "objects it would apply, its GPUs, why it might never be scheduled), as the "
                "launch page's Preview",
            )
        ],
    )
    def create(self, request, tenant_slug=None):
        dry_run = logs.FLAGS.get(request.query_params.get("dry_run", "false"))
        if dry_run is None:
            raise serializers.ValidationError({"dry_run": ["Use true or false."]})
        if dry_run:
            previewed = services.preview_launch(self.tenant, request.user, **self._launch(request))
            return Response(PreviewSerializer(previewed).data)
        job, warnings = services.launch_job(
            self.tenant, request.user, actor=request.user, **self._launch(request)
        )
        body = JobSerializer(job).data
        body["warnings"] = warnings
        return Response(
            body, status=status.HTTP_201_CREATED, headers=self.get_success_headers(body)
        )

    def perform_destroy(self, job):
        delete_data = logs.FLAGS.get(self.request.query_params.get("delete_data", "false"))
        if delete_data is None:  # `yes` kept the data without a word
            raise serializers.ValidationError({"delete_data": ["Use true or false."]})
        services.delete_job(job, actor=self.request.user, delete_data=delete_data)

    def destroy(self, request, *args, **kwargs):
        super().destroy(request, *args, **kwargs)
        return Response(status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["get"])
    def manifests(self, request, tenant_slug=None, name=None):
        """Everything the job owns in the cluster, as the portal applies it (its page shows
        them)."""
        return Response(services.job_manifests(self.get_object()))

    @extend_schema(request=None, responses=JobSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, tenant_slug=None, name=None):
        return Response(
            JobSerializer(services.cancel_job(self.get_object(), actor=request.user)).data
        )

    @extend_schema(request=None, responses={201: JobSerializer})
    @action(detail=True, methods=["post"])
    def relaunch(self, request, tenant_slug=None, name=None):
        job = get_job_for_user(request.user, self.tenant.slug, name)
        new, warnings = services.relaunch_job(job, actor=request.user)
        body = {**JobSerializer(new).data, "warnings": warnings}
        return Response(body, status=201, headers=self.get_success_headers(body))

    @extend_schema(request=ExtendSerializer, responses=EndpointSerializer)
    @action(detail=True, methods=["post"], url_path=r"endpoints/(?P<endpoint>[-a-z0-9]+)/extend")
    def extend_endpoint(self, request, tenant_slug=None, name=None, endpoint=None):
        job = get_job_for_user(request.user, self.tenant.slug, name)
        row = get_object_or_404(job.endpoints, name=endpoint)
        body = ExtendSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        row = endpoints.extend(row, hours=body.validated_data["hours"], actor=request.user)
        return Response(EndpointSerializer(row).data)

    @extend_schema(responses=JobEventSerializer(many=True))
    @action(detail=True, methods=["get"])
    def events(self, request, tenant_slug=None, name=None):
        job = self.get_object()
        return Response(JobEventSerializer(job.events.all()[:200], many=True).data)

    @extend_schema(responses=PodSerializer(many=True))
    @action(detail=True, methods=["get"])
    def pods(self, request, tenant_slug=None, name=None):
        """The job's pods: task, replica, phase, node, containers (with exit codes), Events."""
        job = self.get_object()
        try:
            pods = logs.pods_of(job)
        except K8sError as exc:
            return Response(
                {
                    "detail": f"The cluster did not answer; try again in a moment ({exc.message}).",
                    "code": "cluster_unavailable",
                },
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
            )
        return Response(PodSerializer(pods, many=True).data)

    @extend_schema(
        parameters=[
            OpenApiParameter("tail", int, description="only the last N lines (1 to 100,000)"),
            OpenApiParameter(
                "after",
                str,
                description=(
                    "only the lines since the last read: the X-Log-Cursor header it answered "
                    "with. Follow a log by reading on this way every few seconds while "
                    "X-Log-Open is 1."
                ),
            ),
            OpenApiParameter("container", str),
            OpenApiParameter("download", bool, description="the whole log, as an attachment"),
        ],
        responses={
            (200, "text/plain"): OpenApiTypes.STR,
            (400, "application/json"): OpenApiTypes.OBJECT,
            (503, "text/plain"): OpenApiTypes.STR,
        },
    )
    @action(
        detail=True,
        methods=["get"],
        url_path=r"pods/(?P<pod>[-a-z0-9]+)/log",
        renderer_classes=[JSONRenderer, PlainTextRenderer],
    )
    def pod_log(self, request, tenant_slug=None, name=None, pod=None):
        """One pod's log through the API server (`pods/log`), as text: the last lines, or those
        since the last read (X-Log-Cursor), or the whole log as a file."""
        return logs.log_response(self.get_object(), pod, request.query_params)


class DataVolumeViewSet(LocationOnCreate, TenantScoped, viewsets.ModelViewSet):
    lookup_value_regex = ID_REGEX
    serializer_class = DataVolumeSerializer
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self):
        return DataVolume.objects.filter(tenant=self.tenant)

    def perform_create(self, serializer):
        serializer.instance = services.create_data_volume(
            self.tenant, actor=self.request.user, **serializer.validated_data
        )

    def perform_update(self, serializer):
        size = serializer.validated_data.get("size_gib")
        if size is None or size == serializer.instance.size_gib:
            return  # nothing else of a volume changes (its name and class are fixed)
        serializer.instance = services.expand_data_volume(
            serializer.instance, size_gib=size, actor=self.request.user
        )

    def perform_destroy(self, volume):
        services.delete_data_volume(volume, actor=self.request.user)


class TemplateViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    """Job templates: global ones (platform admins publish) and tenants' own. Saving an existing
    name adds a version."""

    lookup_value_regex = ID_REGEX
    serializer_class = TemplateSerializer

    def get_queryset(self):
        return JobTemplate.objects.for_user(self.request.user).select_related("tenant")

    @extend_schema(request=TemplateWriteSerializer, responses={201: TemplateSerializer})
    def create(self, request):
        write = TemplateWriteSerializer(data=request.data)
        write.is_valid(raise_exception=True)
        data = write.validated_data
        tenant = None
        if data.get("tenant"):
            tenant = get_tenant_for_user(request.user, data["tenant"], role=Role.RESEARCHER)
        else:
            require_platform_admin(request.user)
        version = services.save_template(
            name=data["name"],
            spec_data=data.get("spec"),
            source=data.get("source", ""),
            overridable=data.get("overridable", []),
            description=data.get("description", ""),
            tenant=tenant,
            actor=request.user,
        )
        return Response(TemplateSerializer(version.template).data, status=201)

    @extend_schema(request=None, responses=TemplateSerializer)
    @action(detail=True, methods=["post"])
    def retire(self, request, pk=None):
        """No launch may name it from now on, and it takes no versions; jobs launched from it
        keep their version. For whoever may add its versions."""
        template, _ = services.set_template_retired(
            self.get_object(), retired=True, actor=request.user
        )
        return Response(TemplateSerializer(template).data)

    @extend_schema(request=None, responses=TemplateSerializer)
    @action(detail=True, methods=["post"])
    def restore(self, request, pk=None):
        template, _ = services.set_template_retired(
            self.get_object(), retired=False, actor=request.user
        )
        return Response(TemplateSerializer(template).data)


class EndpointBoardViewSet(viewsets.GenericViewSet):
    """Platform admins: every open endpoint expired or expiring within 24 hours, soonest first
    (the expiry board), to extend or reclaim now."""

    serializer_class = BoardEndpointSerializer
    lookup_value_regex = ID_REGEX

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        require_platform_admin(request.user)

    def get_queryset(self):
        return Endpoint.objects.select_related("job__tenant", "job__owner")

    def list(self, request):
        expiring, expired = endpoints.expiry_board()
        rows = [*expired, *expiring]
        page = self.paginate_queryset(rows)
        if page is None:
            return Response(self.get_serializer(rows, many=True).data)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(request=None, responses=BoardEndpointSerializer)
    @action(detail=True, methods=["post"])
    def reclaim(self, request, pk=None):
        """End it now: its route goes, its app is no longer reachable."""
        endpoints.reclaim_now(self.get_object(), actor=request.user)
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(request=ExtendSerializer, responses=BoardEndpointSerializer)
    @action(detail=True, methods=["post"])
    def extend(self, request, pk=None):
        body = ExtendSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        row = endpoints.extend(
            self.get_object(), hours=body.validated_data["hours"], actor=request.user
        )
        return Response(self.get_serializer(row).data)
