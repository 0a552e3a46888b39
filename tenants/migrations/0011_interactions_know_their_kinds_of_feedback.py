from django.db import migrations, models
from django.db.models import F


def mark_feedback_already_stored(apps, schema_editor):
    Interaction, FeedbackEvent = apps.get_model("tenants", "Interaction"), apps.get_model("tenants", "FeedbackEvent")
    # The kinds in the order of FeedbackEvent.Type when this was written: tenants.models.feedback_bit.
    kinds = ["edit_accepted", "edit_rejected", "edit_persisted", "edit_reverted", "dissatisfied_followup",
             "clarification_answered", "tool_call_invalid", "interrupted", "task_outcome"]
    for i, kind in enumerate(kinds):
        with_kind = FeedbackEvent.objects.filter(type=kind, interaction__isnull=False).values("interaction_id")
        Interaction.objects.filter(pk__in=with_kind).update(feedback_seen=F("feedback_seen").bitor(1 << i))


class Migration(migrations.Migration):

    dependencies = [
        ("tenants", "0010_invitations"),
    ]

    operations = [
        migrations.AddField(
            model_name="interaction",
            name="feedback_seen",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(mark_feedback_already_stored, migrations.RunPython.noop),
    ]
