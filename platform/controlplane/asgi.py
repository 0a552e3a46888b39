"""The ASGI entry point: the OpenAI-compatible gateway under /v1/, Django for the rest
(tenant API, schema, console), both behind the request-size limit (controlplane/body_limit.py),
and the tenant API behind its organizations' limits, applied before a body is read
(tenants/api/admission.py)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.base")
django_application = get_asgi_application()  # sets Django up: the gateway's imports need it

from django.conf import settings  # noqa: E402

from controlplane.body_limit import body_limited  # noqa: E402
from serving.gateway.app import application as gateway_application  # noqa: E402
from tenants.api.admission import admitted_first  # noqa: E402
from tenants.api.authentication import bearer_key_at_least  # noqa: E402
from tenants.models import Role  # noqa: E402

GATEWAY_PREFIX = "/v1/"
# An adapter upload is the one body allowed past the API's limit (serving/uploads.py), and only
# with an admin's key: an anonymous or viewer's upload is held to the ordinary limit unread.
UPLOADS = {("POST", "/api/v1/adapters"): settings.SERVING_ADAPTER_UPLOAD_MAX_BYTES}
# Each organization's limits before its body is read; an upload is not held to the bytes window.
tenant_api = admitted_first(django_application, uncounted_bodies=frozenset(UPLOADS))


async def _routed(scope, receive, send):
    # The server's start and shutdown (lifespan) go to the gateway, which closes its connections
    # to the replicas; Django has nothing to do then, and would refuse them.
    if scope["type"] == "lifespan" or (scope["type"] == "http" and scope["path"].startswith(GATEWAY_PREFIX)):
        await gateway_application(scope, receive, send)
    else:
        await tenant_api(scope, receive, send)


application = body_limited(_routed, limit=settings.DATA_UPLOAD_MAX_MEMORY_SIZE, larger=UPLOADS,
                           entitled=bearer_key_at_least(Role.ADMIN))
