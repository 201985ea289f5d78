from django.db import migrations, models


def fill_totals(apps, schema_editor):
    """Jobs launched before these columns: their totals from the stored spec."""
    from k8s_adapters.jobspec import JobSpec

    Job = apps.get_model("jobs", "Job")
    for job in Job.objects.exclude(spec={}).iterator():
        try:
            spec = JobSpec.from_dict(job.spec)
        except (KeyError, TypeError, ValueError):
            continue  # an unreadable old spec counts as nothing, as before
        Job.objects.filter(pk=job.pk).update(
            cpu_millicores=spec.total_cpu_millicores, memory_mib=spec.total_memory_mib
        )


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0006_endpoint_host_label"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="cpu_millicores",
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="job",
            name="memory_mib",
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.RunPython(fill_totals, migrations.RunPython.noop),
    ]
