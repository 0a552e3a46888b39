"""The gateway's operation in the tenant API's OpenAPI document (a drf-spectacular
postprocessing hook): it is served by its own ASGI app, so spectacular cannot see it.

The request body lists what protocol.ChatCompletionRequestSerializer accepts (a test holds
them equal); the response is the OpenAI chat completion object, as far as the gateway fills
it in.
"""

PATH = "/v1/chat/completions"

_ERROR = {
    "type": "object",
    "properties": {"error": {"type": "object", "properties": {
        "message": {"type": "string"}, "type": {"type": "string"},
        "param": {"type": "string", "nullable": True}, "code": {"type": "string", "nullable": True},
    }, "required": ["message", "type"]}},
    "required": ["error"],
}
_LOGPROBS = {"type": "object", "nullable": True, "description": "Only when the request asked for logprobs.",
             "properties": {"content": {"type": "array", "items": {"type": "object", "properties": {
                 "token": {"type": "string"}, "logprob": {"type": "number"},
                 "top_logprobs": {"type": "array", "items": {"type": "object"}}}}}}}
_COMPLETION = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "format": "uuid", "description": "The interaction id: what feedback points at."},
        "object": {"type": "string", "enum": ["chat.completion"]},
        "created": {"type": "integer"},
        "model": {"type": "string", "description": "The adapter version that served it (<org>@v<N>), or the base model's name."},
        "choices": {"type": "array", "items": {"type": "object", "properties": {
            "index": {"type": "integer"},
            "message": {"type": "object", "properties": {"role": {"type": "string"}, "content": {"type": "string", "nullable": True}}},
            "logprobs": _LOGPROBS,
            "finish_reason": {"type": "string", "nullable": True},
        }}},
        "usage": {"type": "object", "properties": {
            "prompt_tokens": {"type": "integer"}, "completion_tokens": {"type": "integer"}, "total_tokens": {"type": "integer"}}},
    },
    "required": ["id", "model", "choices"],
}


def add_chat_completions(result, generator, request, public):
    components = result.setdefault("components", {}).setdefault("schemas", {})
    components["ChatCompletionRequest"] = _request_schema()
    components["ChatCompletion"] = _COMPLETION
    components["OpenAIError"] = _ERROR
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/OpenAIError"}}}}
    result.setdefault("paths", {})[PATH] = {"post": {
        "operationId": "chat_completions_create",
        "summary": "Chat completion from the organization's adapter (OpenAI-compatible).",
        "description": (
            "Served by the organization's current adapter version (model \"default\") or one of its deployed versions "
            "by name. Every completion is recorded under the privacy policy; the response id is the interaction id. "
            "With stream: true the response is text/event-stream, chunks of the same object, then `data: [DONE]`. "
            "A task joins by metadata.task_id or the X-Task-Id header."
        ),
        "tags": ["gateway"],
        "security": [{"apiKey": []}],
        "parameters": [{"name": "X-Task-Id", "in": "header", "required": False, "schema": {"type": "string", "format": "uuid"}}],
        "requestBody": {"required": True, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ChatCompletionRequest"}}}},
        "responses": {
            "200": {"description": "The completion (or, streamed, its chunks).", "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/ChatCompletion"}},
                "text/event-stream": {"schema": {"type": "string"}}}},
            "400": {"description": "Invalid body, unsupported parameter, prompt longer than the context.", **error},
            "401": {"description": "Missing, unknown or revoked API key.", **error},
            "404": {"description": "No such model (or task) in this organization.", **error},
            "429": {"description": "Over the organization's limits; see Retry-After.", **error},
            "503": {"description": "No model server answered in time; nothing was recorded.", **error},
        },
    }}
    return result


def _request_schema() -> dict:
    """The parameters ChatCompletionRequestSerializer accepts; a test holds the two equal.
    Messages are the tenant API's own MessageRequest component."""
    number = {"type": "number", "nullable": True}
    properties = {
        "model": {"type": "string", "maxLength": 100, "description": '"default" or one of the organization\'s deployed adapter names.'},
        "messages": {"type": "array", "minItems": 1, "maxItems": 256, "items": {"$ref": "#/components/schemas/MessageRequest"}},
        "stream": {"type": "boolean", "default": False},
        "stream_options": {"type": "object", "nullable": True, "properties": {"include_usage": {"type": "boolean"}}, "additionalProperties": False},
        "max_tokens": {"type": "integer", "minimum": 1, "nullable": True},
        "max_completion_tokens": {"type": "integer", "minimum": 1, "nullable": True},
        "temperature": {**number, "minimum": 0, "maximum": 2},
        "top_p": {**number, "minimum": 0, "maximum": 1},
        "seed": {"type": "integer", "nullable": True},
        "stop": {"nullable": True, "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 4}]},
        "presence_penalty": {**number, "minimum": -2, "maximum": 2},
        "frequency_penalty": {**number, "minimum": -2, "maximum": 2},
        "logprobs": {"type": "boolean", "default": False, "description": "Per-token logprobs in the response (always recorded)."},
        "top_logprobs": {"type": "integer", "minimum": 0, "maximum": 20, "nullable": True},
        "n": {"type": "integer", "minimum": 1, "maximum": 1, "nullable": True},
        "user": {"type": "string", "maxLength": 200, "nullable": True, "description": "The end user; canary assignment is sticky per user."},
        "metadata": {"type": "object", "nullable": True, "maxProperties": 16, "additionalProperties": {"type": "string", "maxLength": 512},
                     "description": '{"task_id": "<background task id>"} links the call to a task.'},
    }
    return {"type": "object", "properties": properties, "required": ["model", "messages"], "additionalProperties": False}
