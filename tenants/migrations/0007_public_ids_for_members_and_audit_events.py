import uuid

from django.db import migrations, models


def give_each_row_its_own(apps, schema_editor):
    for name in ("Membership", "AuditEvent"):
        model = apps.get_model("tenants", name)
        for pk in model.objects.filter(public_id__isnull=True).values_list("pk", flat=True).iterator():
            model.objects.filter(pk=pk).update(public_id=uuid.uuid4())


class Migration(migrations.Migration):
    """Members and audit events get ids that tell nothing of other organizations' rows."""

    dependencies = [
        ("tenants", "0006_storage_usage_and_quota"),
    ]

    operations = [
        migrations.AddField(model_name="membership", name="public_id", field=models.UUIDField(null=True, editable=False)),
        migrations.AddField(model_name="auditevent", name="public_id", field=models.UUIDField(null=True, editable=False)),
        migrations.RunPython(give_each_row_its_own, migrations.RunPython.noop),
    ]
