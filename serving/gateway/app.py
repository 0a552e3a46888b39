"""The gateway's ASGI application, served beside Django's (controlplane/asgi.py sends it
every path under /v1/).

It is a Starlette app rather than a Django view because Django's ASGI handler runs every
middleware and request signal of the console on a thread of its own, a new thread per
request: several times the gateway's own work, on the hot path of every completion. The
gateway needs none of it (no sessions, cookies or CSRF: API keys only) and does its
database work on threads that keep their connections (database.py).
"""

import contextlib
import logging

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from serving.gateway import upstream
from serving.gateway.protocol import ModelNotFound, ServerError
from serving.gateway.views import chat_completions

log = logging.getLogger(__name__)


async def not_found(request: Request, exc: Exception):
    return ModelNotFound(f"No endpoint {request.url.path}; this gateway serves POST /v1/chat/completions.").response()


async def server_error(request: Request, exc: Exception):
    log.error("gateway request failed", exc_info=exc)
    return ServerError("The gateway failed; the request was not served.").response()


@contextlib.asynccontextmanager
async def lifespan(app: Starlette):
    yield
    await upstream.close()  # the replicas' connections and watcher, while their event loop still runs


application = Starlette(
    routes=[Route("/v1/chat/completions", chat_completions, methods=["GET", "POST", "PUT", "PATCH", "DELETE"])],
    exception_handlers={404: not_found, Exception: server_error},
    lifespan=lifespan,
)
