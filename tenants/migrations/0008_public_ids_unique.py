import uuid

from django.db import migrations, models


class Migration(migrations.Migration):
    """Apart from 0007's data migration: PostgreSQL alters no table with updates pending in the same transaction."""

    dependencies = [
        ("tenants", "0007_public_ids_for_members_and_audit_events"),
    ]

    operations = [
        migrations.AlterField(model_name="membership", name="public_id",
                              field=models.UUIDField(default=uuid.uuid4, unique=True, editable=False)),
        migrations.AlterField(model_name="auditevent", name="public_id",
                              field=models.UUIDField(default=uuid.uuid4, unique=True, editable=False)),
    ]
