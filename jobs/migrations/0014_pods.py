from django.db import migrations, models


def count_pods(apps, schema_editor):
    """Every job's pods from its stored spec: admission counts those of the jobs holding quota."""
    Job = apps.get_model("jobs", "Job")
    batch = []
    for job in Job.objects.only("id", "spec").iterator(chunk_size=1000):
        job.pods = sum(int(task.get("replicas", 1)) for task in job.spec.get("tasks", ()))
        batch.append(job)
        if len(batch) == 1000:
            Job.objects.bulk_update(batch, ["pods"])
            batch = []
    Job.objects.bulk_update(batch, ["pods"])


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0013_job_quota_released_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="pods",
            field=models.PositiveIntegerField(
                default=0, help_text="Its pods: every task's replicas."
            ),
        ),
        migrations.RunPython(count_pods, migrations.RunPython.noop),
    ]
