from django.utils.dateparse import parse_date

from core.filters import text_filters


def filter_audit(events, params):
    """Filter audit events by tenant slug, actor name, action and first day; one code path for
    the page and the API."""
    filters = text_filters(params, ("tenant", "actor", "action", "since"))
    if filters["tenant"]:
        events = events.filter(tenant__slug=filters["tenant"])
    if filters["actor"]:
        events = events.filter(actor_name__icontains=filters["actor"])
    if filters["action"]:
        events = events.filter(action=filters["action"])
    try:
        since = parse_date(filters["since"]) if filters["since"] else None
    except ValueError:  # well formed but no such day (2026-02-30)
        since = None
    if since:
        events = events.filter(created_at__date__gte=since)
    return events, filters
