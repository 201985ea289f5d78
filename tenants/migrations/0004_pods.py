import django.core.validators
from django.db import migrations, models
from django.db.models import Q, Sum

DEFAULT = 256
HOLDING = ["submitting", "pending", "running", "error"]
FINISHED = ["succeeded", "failed", "cancelled"]


def room_for_running_pods(apps, schema_editor):
    """Tenants whose admitted jobs already run more pods than the default get that many: a
    quota below what runs would refuse their jobs' restarted pods."""
    Tenant = apps.get_model("tenants", "Tenant")
    Job = apps.get_model("jobs", "Job")
    holding = Q(state__in=HOLDING) | Q(
        state__in=FINISHED, submitted_at__isnull=False, quota_released_at__isnull=True
    )
    held = Job.objects.filter(holding).values("tenant").annotate(pods=Sum("pods"))
    for row in held.filter(pods__gt=DEFAULT):
        Tenant.objects.filter(pk=row["tenant"]).update(pod_quota=row["pods"])


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0003_allow_direct_exposure"),
        ("jobs", "0014_pods"),
    ]

    operations = [
        migrations.AddField(
            model_name="tenant",
            name="pod_quota",
            field=models.PositiveIntegerField(
                default=DEFAULT,
                help_text="The most pods the tenant's jobs run at once (one per replica of each "
                "task). Without it, jobs of many tiny replicas could fill every node's pod "
                "slots.",
                validators=[
                    django.core.validators.MinValueValidator(1),
                    django.core.validators.MaxValueValidator(1000000),
                ],
                verbose_name="Pods",
            ),
        ),
        migrations.RunPython(room_for_running_pods, migrations.RunPython.noop),
    ]
