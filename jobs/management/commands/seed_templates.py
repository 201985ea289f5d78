"""Publish the built-in global job templates: those missing, and a new version of those this
command published whose built-in spec changed since (a fix, such as a notebook made private).
A template a platform admin has saved a version of, or retired, is theirs: it is left as it is."""

from django.core.management.base import BaseCommand

from jobs import services
from jobs.models import JobTemplate
from jobs.seed import TEMPLATES


class Command(BaseCommand):
    help = __doc__

    def handle(self, *args, **options):
        added = updated = 0
        for name, description, spec, overridable in TEMPLATES:
            template = JobTemplate.objects.filter(name=name, tenant__isnull=True).first()
            latest = template.latest if template else None
            if template is not None and (
                template.retired_at is not None  # a platform admin retired it
                or latest is None
                or latest.created_by_id is not None  # an admin's version: theirs now
                or (latest.spec, latest.overridable) == (spec, overridable)
            ):
                continue
            services.save_template(
                name=name,
                spec_data=spec,
                overridable=overridable,
                description=description,
                actor=None,
            )
            added, updated = (added + 1, updated) if template is None else (added, updated + 1)
        present = len(TEMPLATES) - added - updated
        self.stdout.write(f"templates: {added} added, {updated} updated, {present} present")
