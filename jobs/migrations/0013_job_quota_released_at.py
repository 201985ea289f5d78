from django.db import migrations, models
from django.db.models.functions import Coalesce, Now


def finished_jobs_released(apps, schema_editor):
    """Jobs that ended before the portal followed their pods' stop: long stopped."""
    Job = apps.get_model("jobs", "Job")
    Job.objects.filter(state__in=["succeeded", "failed", "cancelled"]).update(
        quota_released_at=Coalesce("finished_at", Now())
    )


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0012_template_version_source"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="quota_released_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(finished_jobs_released, migrations.RunPython.noop),
    ]
