# Only a name's first job gets the readable hosts: the names jobs were launched under are noted,
# those of jobs deleted since as the audit log recorded their launches.

import django.db.models.deletion
from django.db import migrations, models


def note_launched(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    LaunchedName = apps.get_model("jobs", "LaunchedName")
    AuditEvent = apps.get_model("tenants", "AuditEvent")
    names = set(Job.objects.values_list("tenant_id", "name"))
    launches = AuditEvent.objects.filter(action="job.launch", tenant__isnull=False)
    for tenant, after in launches.values_list("tenant_id", "after").iterator():
        name = after.get("name") if isinstance(after, dict) else None
        if isinstance(name, str) and 0 < len(name) <= 48:
            names.add((tenant, name))
    LaunchedName.objects.bulk_create(
        [LaunchedName(tenant_id=tenant, name=name) for tenant, name in names],
        batch_size=1000,
        ignore_conflicts=True,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0016_host_labels_never_reused"),
        ("tenants", "0005_usage_writes"),
    ]

    operations = [
        migrations.CreateModel(
            name="LaunchedName",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=48)),
                (
                    "tenant",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="tenants.tenant",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("tenant", "name"), name="launched_name_per_tenant"
                    )
                ]
            },
        ),
        migrations.RunPython(note_launched, migrations.RunPython.noop),
    ]
