from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0004_keys_know_what_minted_them'),
    ]

    operations = [
        migrations.AddField(
            model_name='interaction',
            name='interrupted',
            field=models.BooleanField(default=False),
        ),
    ]
