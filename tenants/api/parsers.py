"""A strict JSON parser: a size limit, exact UTF-8, standard JSON, clear messages for each."""

import json
import re

from django.conf import settings
from rest_framework import exceptions, parsers

from tenants.api.errors import RequestTooLarge


# UTF-8 cannot carry half of a surrogate pair, but a JSON escape can; an error message that
# quoted one could not be encoded (a 500), nor could the text be stored on PostgreSQL.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


class StrictJSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise RequestTooLarge(f"The request body is larger than {limit} bytes. Split the batch.")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise exceptions.ParseError(f"The request body is not valid UTF-8 (byte {error.start}).") from None
        try:
            value = json.loads(text, parse_constant=_reject_constant)
            if _SURROGATE_ESCAPE.search(text):  # a pair is one character once parsed: only a lone half fails here
                json.dumps(value, ensure_ascii=False).encode("utf-8")
            return value
        except UnicodeEncodeError:
            raise exceptions.ParseError("The request body holds half of a surrogate pair (\\ud800 to \\udfff alone), "
                                        "which is not Unicode text.") from None
        except ValueError as error:
            raise exceptions.ParseError(f"Malformed JSON: {error}.") from None
        except RecursionError:
            raise exceptions.ParseError("The request body is nested too deeply.") from None
