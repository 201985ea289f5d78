from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0011_template_retired_at'),
    ]

    operations = [
        migrations.AddField(
            model_name='jobtemplateversion',
            name='source',
            field=models.TextField(blank=True, help_text='The spec as its author wrote it (YAML, comments and all), when saved as text.'),
        ),
    ]
