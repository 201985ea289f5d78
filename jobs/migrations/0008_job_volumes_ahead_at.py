from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0007_compute_totals"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="volumes_ahead_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
