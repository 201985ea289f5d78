from django.utils.dateparse import parse_date


def filter_audit(events, params):
    """Filter audit events by tenant slug, actor name, action and first day; one code path for
    the page and the API."""
    filters = {k: params.get(k, "").strip() for k in ("tenant", "actor", "action", "since")}
    if filters["tenant"]:
        events = events.filter(tenant__slug=filters["tenant"])
    if filters["actor"]:
        events = events.filter(actor_name__icontains=filters["actor"])
    if filters["action"]:
        events = events.filter(action=filters["action"])
    since = parse_date(filters["since"]) if filters["since"] else None
    if since:
        events = events.filter(created_at__date__gte=since)
    return events, filters
