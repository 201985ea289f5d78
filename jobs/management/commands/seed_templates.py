"""Publish the built-in global job templates that are missing."""

from django.core.management.base import BaseCommand

from jobs import services
from jobs.models import JobTemplate
from jobs.seed import TEMPLATES


class Command(BaseCommand):
    help = __doc__

    def handle(self, *args, **options):
        added = 0
        for name, description, spec, overridable in TEMPLATES:
            if not JobTemplate.objects.filter(name=name, tenant__isnull=True).exists():
                services.save_template(
                    name=name,
                    spec_data=spec,
                    overridable=overridable,
                    description=description,
                    actor=None,
                )
                added += 1
        self.stdout.write(f"templates: {added} added, {len(TEMPLATES) - added} present")
