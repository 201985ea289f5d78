# Each endpoint gets its own host: the label is derived once and stored (unique).

from django.db import migrations, models

from k8s_adapters.names import endpoint_host_label


def fill(apps, schema_editor):
    Endpoint = apps.get_model("jobs", "Endpoint")
    for endpoint in Endpoint.objects.select_related("job__tenant"):
        endpoint.host_label = endpoint_host_label(
            endpoint.job.tenant.slug, endpoint.job.name, endpoint.name
        )
        endpoint.save(update_fields=["host_label"])


class Migration(migrations.Migration):
    dependencies = [("jobs", "0005_sync_fields")]

    operations = [
        migrations.AddField(
            model_name="endpoint",
            name="host_label",
            field=models.CharField(max_length=63, null=True),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="endpoint",
            name="host_label",
            field=models.CharField(
                help_text="The first label of the endpoint's own host name (unique, never parsed).",
                max_length=63,
                unique=True,
            ),
        ),
    ]
