# Host labels are never given twice: the labels endpoints hold now are taken.

from django.db import migrations, models


def take_held(apps, schema_editor):
    Endpoint = apps.get_model("jobs", "Endpoint")
    HostLabel = apps.get_model("jobs", "HostLabel")
    held = Endpoint.objects.values_list("host_label", flat=True)
    HostLabel.objects.bulk_create([HostLabel(label=label) for label in held], batch_size=1000)


class Migration(migrations.Migration):
    dependencies = [("jobs", "0015_endpoint_closed_by_admin")]

    operations = [
        migrations.CreateModel(
            name="HostLabel",
            fields=[
                ("label", models.CharField(max_length=63, primary_key=True, serialize=False)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.RunPython(take_held, migrations.RunPython.noop),
    ]
