"""OpenAPI links between the API's operations (create, then read, change, cancel, delete what was
created), added to the generated schema. Clients and generators follow them; Schemathesis' stateful
phase uses them to chain real calls (launch a job, then cancel it; create a volume, then grow it).

A link is added only where the create answer's schema really has the field it reads."""

# operationId of the create -> {link name: (target operationId, {parameter: source})}
# Sources: "path:<parameter of the create's URL>" or "body:<field of its 201 answer>".
JOB = {"tenant_slug": "path:tenant_slug", "name": "body:name"}
VOLUME = {"tenant_slug": "path:tenant_slug", "id": "body:id"}
MEMBER = {"tenant_slug": "path:tenant_slug", "id": "body:id"}
TENANT = {"slug": "body:slug"}
TENANT_SCOPE = {"tenant_slug": "body:slug"}
LINKS = {
    "tenants_jobs_create": {
        "GetJob": ("tenants_jobs_retrieve", JOB),
        "CancelJob": ("tenants_jobs_cancel_create", JOB),
        "RelaunchJob": ("tenants_jobs_relaunch_create", JOB),
        "JobEvents": ("tenants_jobs_events_list", JOB),
        "JobPods": ("tenants_jobs_pods_list", JOB),
        "DeleteJob": ("tenants_jobs_destroy", JOB),
    },
    "tenants_jobs_relaunch_create": {
        "GetRelaunchedJob": ("tenants_jobs_retrieve", JOB),
        "CancelRelaunchedJob": ("tenants_jobs_cancel_create", JOB),
        "DeleteRelaunchedJob": ("tenants_jobs_destroy", JOB),
    },
    "tenants_volumes_create": {
        "GetVolume": ("tenants_volumes_retrieve", VOLUME),
        "ResizeVolume": ("tenants_volumes_partial_update", VOLUME),
        "DeleteVolume": ("tenants_volumes_destroy", VOLUME),
    },
    "tenants_members_create": {
        "GetMember": ("tenants_members_retrieve", MEMBER),
        "ChangeMember": ("tenants_members_partial_update", MEMBER),
        "RemoveMember": ("tenants_members_destroy", MEMBER),
    },
    "tenants_create": {
        "GetTenant": ("tenants_retrieve", TENANT),
        "ChangeTenant": ("tenants_partial_update", TENANT),
        "TenantJobs": ("tenants_jobs_list", TENANT_SCOPE),
        "LaunchInTenant": ("tenants_jobs_create", TENANT_SCOPE),
        "TenantVolumes": ("tenants_volumes_list", TENANT_SCOPE),
        "ArchiveTenant": ("tenants_archive_create", TENANT),
    },
    "templates_create": {"GetTemplate": ("templates_retrieve", {"id": "body:id"})},
    "me_ssh_keys_create": {
        "GetKey": ("me_ssh_keys_retrieve", {"id": "body:id"}),
        "DeleteKey": ("me_ssh_keys_destroy", {"id": "body:id"}),
    },
    "me_tokens_create": {"RevokeToken": ("me_tokens_destroy", {"id": "body:id"})},
    "ip_pools_create": {
        "GetPool": ("ip_pools_retrieve", {"name": "body:name"}),
        "ChangePool": ("ip_pools_partial_update", {"name": "body:name"}),
    },
}


def add_links(result, generator, request, public):
    """drf-spectacular postprocessing hook."""
    operations = {
        op["operationId"]: op
        for methods in result.get("paths", {}).values()
        for op in methods.values()
        if isinstance(op, dict) and "operationId" in op
    }
    for source_id, links in LINKS.items():
        source = operations.get(source_id)
        created = (source or {}).get("responses", {}).get("201")
        if created is None:
            continue
        fields = _answer_fields(result, created)
        built = {
            name: _link(target, params)
            for name, (target, params) in links.items()
            if target in operations and _sources_exist(params, fields)
        }
        if built:
            created["links"] = built
    return result


def _answer_fields(result, response):
    schema = (response.get("content") or {}).get("application/json", {}).get("schema") or {}
    ref = schema.get("$ref", "")
    if ref.startswith("#/components/schemas/"):
        schema = result["components"]["schemas"].get(ref.rsplit("/", 1)[1], {})
    return set((schema.get("properties") or {}).keys())


def _sources_exist(params, fields):
    return all(
        not source.startswith("body:") or source.split(":", 1)[1] in fields
        for source in params.values()
    )


def _link(target, params):
    expressions = {
        name: (
            f"$response.body#/{source.split(':', 1)[1]}"
            if source.startswith("body:")
            else f"$request.path.{source.split(':', 1)[1]}"
        )
        for name, source in params.items()
    }
    return {"operationId": target, "parameters": expressions}
