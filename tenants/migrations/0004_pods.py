import django.core.validators
from django.db import migrations, models
from django.db.models import Max, Q, Sum

DEFAULT = 256
HOLDING = ["submitting", "pending", "running", "error"]
FINISHED = ["succeeded", "failed", "cancelled"]


def room_for_what_runs_and_waits(apps, schema_editor):
    """Tenants whose admitted jobs already run more pods than the default get that many (a
    quota below what runs would refuse their jobs' restarted pods), and at least as many as
    their largest queued job (the queue is served in order: one that could never fit would hold
    every job behind it for good)."""
    Tenant = apps.get_model("tenants", "Tenant")
    Job = apps.get_model("jobs", "Job")
    holding = Q(state__in=HOLDING) | Q(
        state__in=FINISHED, submitted_at__isnull=False, quota_released_at__isnull=True
    )
    held = Job.objects.filter(holding).values("tenant").annotate(pods=Sum("pods"))
    queued = Job.objects.filter(state="queued").values("tenant").annotate(pods=Max("pods"))
    needed = {}
    for row in [*held.filter(pods__gt=DEFAULT), *queued.filter(pods__gt=DEFAULT)]:
        needed[row["tenant"]] = max(needed.get(row["tenant"], 0), row["pods"])
    for tenant, pods in needed.items():
        Tenant.objects.filter(pk=tenant).update(pod_quota=pods)


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
                db_default=DEFAULT,
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
        migrations.RunPython(room_for_what_runs_and_waits, migrations.RunPython.noop),
    ]
