"""Request and response shapes of the tenant API, and of any policy from its RANGES table.
Requests reject unknown fields: a typo in a field name is an error, not a silently ignored setting."""

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from tenants import recording
from tenants.models import FeedbackEvent, Role
from tenants.privacy import PrivacySettings
from tenants.ranges import Setting, settings_of


class StrictSerializer(serializers.Serializer):
    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = set(data) - set(self.fields)
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in sorted(unknown)})
        return super().to_internal_value(data)


def policy_serializer(name: str, policy_class: type, *, change: bool, resettable: bool = False,
                      help_texts: dict[str, str] | None = None, extra: dict | None = None) -> type[serializers.Serializer]:
    """The shape of a policy (tenants.ranges) with each setting's kind and range, for the OpenAPI
    schema and for responses: every setting in a response; in a change (PUT) any of them, and
    null where `resettable` (back to the default). The policy itself validates a change; this
    only documents it. `extra` adds response fields that are not settings (a version, a time)."""
    help_texts = help_texts or {}

    def field_of(setting: Setting) -> serializers.Field:
        options = {"required": not change, "allow_null": change and resettable,
                   "help_text": help_texts.get(setting.name) or setting.help or None}
        if setting.kind is bool:
            return serializers.BooleanField(**options)
        if setting.kind is str:
            return serializers.ChoiceField(choices=setting.choices, **options)
        if setting.kind is dict:
            numbers = {key: serializers.FloatField(min_value=setting.low, max_value=setting.high, required=not change)
                       for key in setting.choices}
            return type(f"{name}{setting.name.title()}", (serializers.Serializer,), numbers)(**options)
        number_field = serializers.IntegerField if setting.kind is int else serializers.FloatField
        return number_field(min_value=setting.low, max_value=setting.high, **options)

    fields = {setting.name: field_of(setting) for setting in settings_of(policy_class).values()}
    return type(name, (serializers.Serializer,), {**fields, **(extra or {})})


def first_error_message(detail) -> str:
    """A readable summary such as "completion: This field is required." for the message."""
    path = []
    while isinstance(detail, (dict, list)) and detail:
        if isinstance(detail, dict):
            key = next(iter(detail))
            if key != "non_field_errors":
                path.append(str(key))
            detail = detail[key]
        else:
            detail = detail[0]
    return f"{'.'.join(path)}: {detail}" if path else str(detail)


class Text(serializers.CharField):
    """A CharField that takes only JSON strings: DRF would turn 5 into "5" and true into "True"."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class Number(serializers.FloatField):
    """A FloatField that takes only JSON numbers: DRF would take true as 1 and "5" as 5."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            self.fail("invalid")
        return super().to_internal_value(data)


class WholeNumber(serializers.IntegerField):
    """An IntegerField that takes only JSON integers (not true, "5" or 5.0)."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class Flag(serializers.BooleanField):
    """A BooleanField that takes only JSON true and false (not 1 or "yes")."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


# Organization, members, keys, audit -------------------------------------------------------

class OrganizationSerializer(serializers.Serializer):
    org = serializers.CharField(source="slug")
    name = serializers.CharField()
    created_at = serializers.DateTimeField()


class OrganizationDeleteSerializer(StrictSerializer):
    confirm = Text(help_text="The organization's slug, to confirm deletion.")


class MemberSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id")
    email = serializers.EmailField(source="user.email")
    role = serializers.ChoiceField(choices=Role.choices)
    created_at = serializers.DateTimeField()
    joined_at = serializers.DateTimeField(allow_null=True, help_text="Null until the person accepts: a membership added to an "
                                                                     "account that already has a password waits for its link.")


class MemberInvitedSerializer(MemberSerializer):
    invitation_url = serializers.URLField(help_text="Single-use, valid for PLATFORM_INVITATION_TTL_HOURS: lets the member set a "
                                                    "password and enter the console. Shown once.")


class MemberCreateSerializer(StrictSerializer):
    email = serializers.EmailField()
    role = serializers.ChoiceField(choices=Role.choices)


class MemberRoleSerializer(StrictSerializer):
    role = serializers.ChoiceField(choices=Role.choices)


class ApiKeySerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    role = serializers.ChoiceField(choices=Role.choices)
    prefix = serializers.CharField(help_text="The key's first characters, to tell keys apart.")
    created_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)


class ApiKeyCreateSerializer(StrictSerializer):
    name = Text(max_length=100)
    role = serializers.ChoiceField(choices=Role.choices, default=Role.VIEWER)


class ApiKeyCreatedSerializer(ApiKeySerializer):
    key = serializers.CharField(help_text="The key itself. Shown this once; only its hash is kept.")


class AuditEventSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id")
    at = serializers.DateTimeField()
    actor = serializers.CharField()
    action = serializers.CharField()
    target = serializers.CharField()
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)


# Privacy policy ------------------------------------------------------------------------------

PRIVACY_HELP = {
    "training_enabled": "Train this organization's adapter on its data. Off by default.",
    "store_content": "Off is zero-retention mode: metrics and feedback only, never text; turning it off purges stored text.",
    "retention_days": "Recorded content older than this is purged.",
    "redact": "Replace secrets and PII before anything is stored.",
}
PrivacyPolicySerializer = policy_serializer("PrivacyPolicy", PrivacySettings, change=False, help_texts=PRIVACY_HELP)
PrivacyPolicyChangeSerializer = policy_serializer("PrivacyPolicyChange", PrivacySettings, change=True, help_texts=PRIVACY_HELP)


# Recording -----------------------------------------------------------------------------------

MAX_TEXT = 200_000
MAX_LATENCY_MS = 86_400_000


@extend_schema_field({"oneOf": [
    {"type": "string", "maxLength": MAX_TEXT},
    {"type": "array", "items": {"type": "object", "properties": {"type": {"enum": ["text"]}, "text": {"type": "string"}},
                                "required": ["type", "text"], "additionalProperties": False}},
], "nullable": True})
class MessageContent(serializers.Field):
    """A message's content as the OpenAI API has it: a string, null, or a list of text parts."""

    text = Text(allow_blank=True, max_length=MAX_TEXT, trim_whitespace=False)

    def to_internal_value(self, data):
        if data is None:
            return None
        if isinstance(data, str):
            return self.text.run_validation(data)
        if isinstance(data, list) and all(isinstance(p, dict) and p.keys() == {"type", "text"} and p["type"] == "text" for p in data):
            return [{"type": "text", "text": self.text.run_validation(p["text"])} for p in data]
        raise serializers.ValidationError('Must be a string, null, or a list of {"type": "text", "text": ...} parts.')

    def to_representation(self, value):
        return value


class ToolCallFunctionSerializer(StrictSerializer):
    name = Text(max_length=200)
    arguments = Text(allow_blank=True, max_length=MAX_TEXT, trim_whitespace=False)


class ToolCallSerializer(StrictSerializer):
    id = Text(max_length=200)
    type = serializers.ChoiceField(choices=["function"])
    function = ToolCallFunctionSerializer()


class MessageSerializer(StrictSerializer):
    """One chat message in the OpenAI format."""

    role = serializers.ChoiceField(choices=["system", "developer", "user", "assistant", "tool"])
    content = MessageContent(allow_null=True)
    name = Text(required=False, max_length=200)
    tool_calls = serializers.ListField(child=ToolCallSerializer(), required=False, max_length=128)
    tool_call_id = Text(required=False, max_length=200)


class InteractionCreateSerializer(StrictSerializer):
    messages = serializers.ListField(child=MessageSerializer(), min_length=1, max_length=256)
    completion = Text(allow_blank=True, max_length=MAX_TEXT, trim_whitespace=False)
    adapter = Text(allow_null=True, required=False, max_length=100, help_text="The adapter version that served it, or null for the base model.")
    task_id = serializers.UUIDField(required=False, allow_null=True, help_text="The background task this interaction belongs to.")
    # a day at most: the console averages latencies, and near a float's limit their sum is infinite
    latency_ms = Number(required=False, allow_null=True, min_value=0, max_value=MAX_LATENCY_MS)


class InteractionFilterSerializer(StrictSerializer):
    task_id = serializers.UUIDField(required=False, help_text="Only the interactions of this background task.")
    adapter = Text(required=False, max_length=100, help_text="Only those served by this adapter version.")


class CreatedSerializer(serializers.Serializer):
    id = serializers.UUIDField()


class InteractionSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    created_at = serializers.DateTimeField()
    source = serializers.CharField()
    adapter = serializers.CharField(allow_null=True)
    task_id = serializers.UUIDField(allow_null=True)
    end_user = serializers.SerializerMethodField(help_text="The `user` the request named; sealed and purged with the content.")
    latency_ms = serializers.FloatField(allow_null=True)
    prompt_tokens = serializers.IntegerField(allow_null=True)
    completion_tokens = serializers.IntegerField(allow_null=True)
    redactions = serializers.IntegerField()
    interrupted = serializers.BooleanField(help_text="A stream its client dropped; the completion is what was generated until then.")
    content_purged_at = serializers.DateTimeField(allow_null=True)
    messages = serializers.SerializerMethodField()
    completion = serializers.SerializerMethodField()

    def to_representation(self, instance):
        # Decrypt once per row, not once per content field.
        self._content = recording.interaction_content(interaction=instance) or {}
        return super().to_representation(instance)

    def get_end_user(self, instance) -> str | None:
        return self._content.get("end_user")

    def get_messages(self, instance) -> list[dict] | None:
        return self._content.get("messages")

    def get_completion(self, instance) -> str | None:
        return self._content.get("completion")


class FeedbackEventInSerializer(serializers.Serializer):
    """Documents one event of POST /feedback; the events are parsed by tenants.feedback."""

    interaction_id = serializers.UUIDField()
    type = serializers.ChoiceField(choices=sorted(FeedbackEvent.Type.values))
    idempotency_key = serializers.CharField(max_length=200, help_text="Unique per event; a replay with the same key is stored once.")
    value = serializers.FloatField(required=False, allow_null=True, help_text="Required for task_outcome (0 to 1).")
    occurred_at = serializers.DateTimeField(required=False, help_text="ISO 8601 with a time zone; defaults to the time received.")


class FeedbackBatchSerializer(serializers.Serializer):
    events = serializers.ListField(child=FeedbackEventInSerializer(), min_length=1, max_length=settings.FEEDBACK_MAX_BATCH)


class FeedbackItemResultSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["created", "duplicate"])
    id = serializers.UUIDField()


class FeedbackBatchResultSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    duplicates = serializers.IntegerField()
    results = FeedbackItemResultSerializer(many=True)


class FeedbackFilterSerializer(StrictSerializer):
    interaction_id = serializers.UUIDField(required=False, help_text="Only the feedback about this interaction.")
    type = serializers.ChoiceField(choices=sorted(FeedbackEvent.Type.values), required=False)


class FeedbackEventSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    interaction_id = serializers.UUIDField(allow_null=True)
    task_id = serializers.UUIDField(allow_null=True)
    type = serializers.CharField()
    value = serializers.FloatField(allow_null=True)
    idempotency_key = serializers.CharField()
    occurred_at = serializers.DateTimeField()
    received_at = serializers.DateTimeField()


class TaskCreateSerializer(StrictSerializer):
    pass


class TaskSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    created_at = serializers.DateTimeField()
    outcome = serializers.FloatField(allow_null=True)
    outcome_at = serializers.DateTimeField(allow_null=True)
    interactions = serializers.IntegerField(source="interaction_count")


class TaskOutcomeSerializer(StrictSerializer):
    value = Number(min_value=0.0, max_value=1.0)
    idempotency_key = Text(max_length=200)
