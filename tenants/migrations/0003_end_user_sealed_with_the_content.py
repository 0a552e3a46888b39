from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0002_one_outcome_per_task'),
    ]

    operations = [
        migrations.RemoveField(
            model_name='interaction',
            name='end_user',
        ),
    ]
