"""The OpenAI chat-completions wire format, as far as the gateway speaks it: the request it
accepts, the error bodies it answers with, and the rewriting of vLLM's answers.

What vLLM always computes for recording (per-token logprobs, token ids) is removed from
what the client sees unless the client asked for it.
"""

import base64

from django.utils.crypto import salted_hmac
from rest_framework import serializers
from starlette.responses import JSONResponse

from tenants.api.serializers import Flag, MessageSerializer, Number, StrictSerializer, Text, WholeNumber, first_error_message

MAX_METADATA_PAIRS = 16


class StreamOptionsSerializer(StrictSerializer):
    include_usage = Flag(default=False)


class StopField(serializers.Field):
    def to_internal_value(self, data):
        if isinstance(data, str):
            return data
        if isinstance(data, list) and 0 < len(data) <= 4 and all(isinstance(s, str) and s for s in data):
            return data
        raise serializers.ValidationError("Must be a string or a list of up to 4 non-empty strings.")


class MetadataField(serializers.Field):
    def to_internal_value(self, data):
        if isinstance(data, dict) and len(data) <= MAX_METADATA_PAIRS and all(
            isinstance(k, str) and len(k) <= 64 and isinstance(v, str) and len(v) <= 512 for k, v in data.items()
        ):
            return data
        raise serializers.ValidationError(f"Must be an object of up to {MAX_METADATA_PAIRS} string values (keys ≤ 64, values ≤ 512 characters).")


class ChatCompletionRequestSerializer(StrictSerializer):
    model = Text(max_length=100, help_text='"default" (the organization\'s current adapter) or one of its deployed adapter names.')
    messages = serializers.ListField(child=MessageSerializer(), min_length=1, max_length=256)
    stream = Flag(default=False)
    stream_options = StreamOptionsSerializer(required=False, allow_null=True)
    max_tokens = WholeNumber(required=False, allow_null=True, min_value=1)
    max_completion_tokens = WholeNumber(required=False, allow_null=True, min_value=1)
    temperature = Number(required=False, allow_null=True, min_value=0, max_value=2)
    top_p = Number(required=False, allow_null=True, min_value=0, max_value=1)
    seed = WholeNumber(required=False, allow_null=True)
    stop = StopField(required=False, allow_null=True)
    presence_penalty = Number(required=False, allow_null=True, min_value=-2, max_value=2)
    frequency_penalty = Number(required=False, allow_null=True, min_value=-2, max_value=2)
    logprobs = Flag(default=False)
    top_logprobs = WholeNumber(required=False, allow_null=True, min_value=0, max_value=20)
    n = WholeNumber(required=False, allow_null=True, min_value=1, max_value=1,
                    error_messages={"max_value": "Only one choice per request is supported."})
    user = Text(required=False, allow_null=True, max_length=200, help_text="The end user; canary assignment is sticky per user.")
    metadata = MetadataField(required=False, allow_null=True, help_text='{"task_id": "<background task id>"} links the call to a task.')

    def validate(self, data):
        if data.get("top_logprobs") and not data.get("logprobs"):
            raise serializers.ValidationError({"top_logprobs": ["Needs logprobs: true."]})
        if data.get("stream_options") and not data.get("stream"):
            raise serializers.ValidationError({"stream_options": ["Only with stream: true."]})
        return data


# One validator for every request: validating with it changes nothing in it, and a new
# serializer per request would deep-copy all of its fields, the largest part of parsing.
_VALIDATOR = ChatCompletionRequestSerializer()
PARAMETERS = tuple(_VALIDATOR.fields)


def request_parse(body) -> dict:
    """The validated request, or InvalidRequest naming the first problem (and the parameter)."""
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    unknown = sorted(set(body) - set(PARAMETERS))
    if unknown:
        raise InvalidRequest(f"Unsupported parameter: {unknown[0]!r}. This endpoint accepts {', '.join(PARAMETERS)}.", param=unknown[0])
    try:
        return _VALIDATOR.run_validation(body)
    except serializers.ValidationError as invalid:
        errors = serializers.as_serializer_error(invalid)
        param = next((name for name in errors if name != "non_field_errors"), None)
        raise InvalidRequest(first_error_message(errors), param=param) from None


def upstream_body(request: dict, *, served_name: str, org_id) -> dict:
    """What the gateway asks vLLM: the client's request for `served_name`, plus what
    recording needs whether or not the client asked for it, and the organization's cache salt."""
    body = {key: value for key, value in request.items() if value is not None and key not in ("model", "user", "metadata", "stream_options")}
    body.update(model=served_name, logprobs=True, return_token_ids=True, cache_salt=cache_salt(org_id))
    body["messages"] = [_flat_message(message) for message in request["messages"]]
    if request["stream"]:
        body["stream_options"] = {"include_usage": True}
    return body


def cache_salt(org_id) -> str:
    """The organization's salt for vLLM's prefix cache: organizations share the replicas, and
    without it the time to the first token could tell one that another recently sent a prefix.
    Secret (derived from the platform's secret key) and never taken from the client: the request
    schema has no such field."""
    digest = salted_hmac("serving.gateway.cache_salt", str(org_id), algorithm="sha256").digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")  # 43 characters, none of vLLM's forbidden ones


def _flat_message(message: dict) -> dict:
    content = message.get("content")
    if isinstance(content, list):
        message = {**message, "content": "".join(part["text"] for part in content)}
    return {key: value for key, value in message.items() if value is not None}


def client_view(payload: dict, *, request: dict, interaction_id: str, served_name: str) -> dict:
    """vLLM's response (or stream chunk) as the client sees it."""
    payload = {key: value for key, value in payload.items() if key not in ("prompt_token_ids", "prompt_logprobs", "kv_transfer_params")}
    payload.update(id=interaction_id, model=served_name)
    payload["choices"] = [_client_choice(choice, request) for choice in payload.get("choices", [])]
    if request["stream"] and not (request.get("stream_options") or {}).get("include_usage"):
        payload.pop("usage", None)
    return payload


def _client_choice(choice: dict, request: dict) -> dict:
    choice = {key: value for key, value in choice.items() if key != "token_ids"}
    if not request["logprobs"]:
        choice["logprobs"] = None
    elif choice.get("logprobs") and not request.get("top_logprobs"):
        for entry in choice["logprobs"].get("content") or []:
            entry["top_logprobs"] = []
    return choice


class GatewayError(Exception):
    status = 400
    type = "invalid_request_error"
    code: str | None = None

    def __init__(self, message: str, *, param: str | None = None, retry_after: str | None = None, model_worked: bool = False):
        super().__init__(message)
        self.message, self.param, self.retry_after = message, param, retry_after
        self.model_worked = model_worked  # a model server spent work on the request before it failed: charged for

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        headers = {"Retry-After": self.retry_after} if self.retry_after is not None else None
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


class InvalidRequest(GatewayError):
    code = "invalid_request"


class RequestTooLarge(GatewayError):
    status, code = 413, "request_too_large"


class Unauthenticated(GatewayError):
    status, type, code = 401, "authentication_error", "invalid_api_key"


class ModelNotFound(GatewayError):
    status, type, code = 404, "not_found_error", "model_not_found"


class TaskNotFound(GatewayError):
    status, type, code = 404, "not_found_error", "task_not_found"


class StorageQuotaExceeded(GatewayError):
    status, type, code = 403, "permission_error", "storage_quota_exceeded"


class TooManyRequests(GatewayError):
    status, type, code = 429, "rate_limit_error", "rate_limit_exceeded"


class UpstreamUnavailable(GatewayError):
    status, type, code = 503, "service_unavailable", "model_unavailable"


class DatabaseUnavailable(GatewayError):
    status, type, code = 503, "service_unavailable", "database_unavailable"


class ServerError(GatewayError):
    status, type, code = 500, "server_error", None
