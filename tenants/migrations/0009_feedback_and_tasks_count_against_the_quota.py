from django.db import migrations
from django.db.models import F

FEEDBACK_ROW_BYTES, TASK_ROW_BYTES = 256, 64  # tenants.storage's when this was written


def _counted(sign: int):
    """What organizations stored before feedback events and tasks counted against the quota:
    added (sign 1), or taken off again when the migration is reversed (-1)."""

    def count(apps, schema_editor):
        Organization, FeedbackEvent, BackgroundTask, StorageUsage = (
            apps.get_model("tenants", name) for name in ("Organization", "FeedbackEvent", "BackgroundTask", "StorageUsage"))
        for org_id in Organization.objects.values_list("pk", flat=True):
            rows = FeedbackEvent.objects.filter(org_id=org_id).count() * FEEDBACK_ROW_BYTES
            rows += BackgroundTask.objects.filter(org_id=org_id).count() * TASK_ROW_BYTES
            StorageUsage.objects.get_or_create(org_id=org_id)  # one that never recorded has none yet
            StorageUsage.objects.filter(org_id=org_id).update(used_bytes=F("used_bytes") + sign * rows)

    return count


class Migration(migrations.Migration):

    dependencies = [
        ("tenants", "0008_public_ids_unique"),
    ]

    operations = [
        migrations.RunPython(_counted(1), _counted(-1)),
    ]
