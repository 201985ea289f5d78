# ApiToken and SSHKey now belong to the accounts app; their tables stay.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("portal", "0002_sshkey"),
        ("accounts", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel("ApiToken"), migrations.DeleteModel("SSHKey")]
        )
    ]
