import django.db.models.deletion
from django.db import migrations, models
from django.db.models import Count, Sum
from django.db.models.functions import Length

ROW_BYTES = 512  # tenants.storage.ROW_BYTES when this was written


def count_what_is_stored(apps, schema_editor):
    """Organizations recording before the quota start with what they already store."""
    Organization, Interaction, StorageUsage = (apps.get_model("tenants", name) for name in ("Organization", "Interaction", "StorageUsage"))
    for org_id in Organization.objects.values_list("pk", flat=True):
        stored = Interaction.objects.filter(org_id=org_id).aggregate(rows=Count("pk"), content=Sum(Length("content")))
        StorageUsage.objects.create(org_id=org_id, used_bytes=stored["rows"] * ROW_BYTES + (stored["content"] or 0))


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0005_streams_dropped_by_their_client'),
    ]

    operations = [
        migrations.CreateModel(
            name='StorageUsage',
            fields=[
                ('org', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='storage_usage', serialize=False, to='tenants.organization')),
                ('used_bytes', models.BigIntegerField(default=0)),
                ('quota_bytes', models.BigIntegerField(null=True)),
            ],
        ),
        migrations.RunPython(count_what_is_stored, migrations.RunPython.noop),
    ]
