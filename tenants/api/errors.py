"""One error shape for the whole tenant API: {"error": {"code", "message", "details"?}}.

`details` holds per-field or per-item problems (the index of each bad event of a batch).
"""

import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from tenants.api.serializers import first_error_message
from tenants.errors import Conflict, DomainError, Forbidden, InvalidInput, NotFound, QuotaExceeded, Unavailable

log = logging.getLogger(__name__)

DOMAIN_STATUS = {
    InvalidInput: status.HTTP_400_BAD_REQUEST,
    NotFound: status.HTTP_404_NOT_FOUND,
    Conflict: status.HTTP_409_CONFLICT,
    Forbidden: status.HTTP_403_FORBIDDEN,
    QuotaExceeded: status.HTTP_403_FORBIDDEN,
    Unavailable: status.HTTP_503_SERVICE_UNAVAILABLE,
    DomainError: status.HTTP_400_BAD_REQUEST,
}


class RequestTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "request_too_large"


def error_body(code: str, message: str, details=None) -> dict:
    error = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    return {"error": error}


def exception_handler(exc, context):
    if isinstance(exc, (OperationalError, InterfaceError)):  # down, restarting, unreachable: not the request's fault
        log.warning("The tenant API's database call failed: %s", exc)
        return Response(error_body("database_unavailable", "The platform's database is unavailable; nothing was applied. Retry shortly."),
                        status=status.HTTP_503_SERVICE_UNAVAILABLE, headers={"Retry-After": "2"})
    if isinstance(exc, DomainError):
        return Response(error_body(exc.code, exc.message, exc.details), status=_domain_status(exc))
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        exc = RequestTooLarge(f"The request body is larger than {limit} bytes. Split the batch.")
    if isinstance(exc, Http404):
        exc = exceptions.NotFound("Not found in this organization.")
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        response.data = error_body("invalid_request", first_error_message(exc.detail), exc.detail)
    else:
        response.data = error_body(_code(exc), str(exc.detail))
    return response


def _code(exc: exceptions.APIException) -> str:
    codes = exc.get_codes()
    return codes if isinstance(codes, str) else exc.default_code


def not_found_view(request, exception=None):
    return JsonResponse(error_body("not_found", "No such endpoint or object."), status=404)


def server_error_view(request):
    return JsonResponse(error_body("server_error", "The server failed; the request was not applied."), status=500)


def _domain_status(exc: DomainError) -> int:
    """The status of the error's class or of the nearest base class that has one."""
    return next(DOMAIN_STATUS[cls] for cls in type(exc).__mro__ if cls in DOMAIN_STATUS)
