"""Filters of a tenant's job list: one code path for the page and the API."""

from core.filters import text_filters

FIELDS = {
    "state": "state",
    "owner": "owner__username",
    "template": "template_version__template__name",
}


def filter_jobs(jobs, params):
    """(jobs filtered by state, owner's username and template name; the filters as given)."""
    filters = text_filters(params, FIELDS)
    for key, value in filters.items():
        if value:
            jobs = jobs.filter(**{FIELDS[key]: value})
    return jobs, filters
