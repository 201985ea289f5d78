# SSH keys and API tokens moved here from the portal app: their tables stay as they are, only
# Django's model state moves (the portal app's 0003 removes them from its state).

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

import accounts.models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("portal", "0002_sshkey"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    state_operations = [
        migrations.CreateModel(
            name="ApiToken",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=100)),
                ("key_id", models.CharField(max_length=16, unique=True)),
                ("token_hash", models.CharField(max_length=64)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("expires_at", models.DateTimeField(blank=True, null=True)),
                ("revoked_at", models.DateTimeField(blank=True, null=True)),
                ("last_used_at", models.DateTimeField(blank=True, null=True)),
                ("user", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="api_tokens", to=settings.AUTH_USER_MODEL)),
            ],
            options={"ordering": ["-created_at"], "db_table": "portal_apitoken"},
        ),
        migrations.CreateModel(
            name="SSHKey",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=100)),
                ("public_key", models.TextField(validators=[accounts.models.validate_ssh_public_key])),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("user", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="ssh_keys", to=settings.AUTH_USER_MODEL)),
            ],
            options={"ordering": ["name"], "db_table": "portal_sshkey"},
        ),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=state_operations)]
