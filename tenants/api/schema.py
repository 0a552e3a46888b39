"""OpenAPI details drf-spectacular cannot infer: our authentication schemes, and that request
bodies reject unknown fields (StrictSerializer)."""

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "tenants.api.authentication.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema):
        return build_bearer_security_scheme_object(header_name="Authorization", token_prefix="Bearer")


class ConsoleSessionScheme(OpenApiAuthenticationExtension):
    target_class = "tenants.api.authentication.ConsoleSessionAuthentication"
    name = "consoleSession"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "cookie", "name": settings.SESSION_COOKIE_NAME}


def forbid_unknown_request_fields(result, generator, request, public):
    """Postprocessing hook: every request body component is closed to extra properties."""
    for name, component in result.get("components", {}).get("schemas", {}).items():
        if name.endswith("Request") and component.get("type") == "object":
            component["additionalProperties"] = False
    return result
