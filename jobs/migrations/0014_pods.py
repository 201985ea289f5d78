from django.db import migrations, models

# Every job holding quota or waiting for it gets its pods from its stored spec (what admission
# counts); finished jobs that hold nothing keep 0. In SQL, one statement: a Python loop over a
# large table would hold the table's lock for as long as it ran.
COUNT_PODS = """
UPDATE jobs_job SET pods = COALESCE((
    SELECT SUM(COALESCE((task->>'replicas')::integer, 1))
    FROM jsonb_array_elements(
        CASE WHEN jsonb_typeof(spec->'tasks') = 'array' THEN spec->'tasks' ELSE '[]'::jsonb END
    ) AS task
), 0)
WHERE state IN ('queued', 'submitting', 'pending', 'running', 'error')
   OR (state IN ('succeeded', 'failed', 'cancelled') AND submitted_at IS NOT NULL
       AND quota_released_at IS NULL)
"""


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0013_job_quota_released_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="pods",
            field=models.PositiveIntegerField(
                db_default=0, default=0, help_text="Its pods: every task's replicas."
            ),
        ),
        migrations.RunSQL(COUNT_PODS, migrations.RunSQL.noop),
    ]
