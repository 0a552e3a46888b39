import django.db.models.deletion
from django.db import migrations, models


def link_keys_to_the_keys_that_minted_them(apps, schema_editor):
    """Keys made with a key name it in created_by ("key:<prefix>"); prefixes are unique within
    an organization in practice, and an ambiguous one is left unlinked."""
    ApiKey = apps.get_model("tenants", "ApiKey")
    for key in ApiKey._base_manager.filter(created_by__startswith="key:"):
        makers = list(ApiKey._base_manager.filter(org_id=key.org_id, prefix=key.created_by[len("key:"):]).exclude(pk=key.pk))
        if len(makers) == 1:
            ApiKey._base_manager.filter(pk=key.pk).update(minted_by=makers[0])


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0003_end_user_sealed_with_the_content'),
    ]

    operations = [
        migrations.AddField(
            model_name='apikey',
            name='minted_by',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='minted', to='tenants.apikey'),
        ),
        migrations.RunPython(link_keys_to_the_keys_that_minted_them, migrations.RunPython.noop),
    ]
