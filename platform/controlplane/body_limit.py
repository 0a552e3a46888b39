"""Request bodies past the size limit, refused before anything reads them.

Django's ASGI handler spools the whole body of every request to a temporary file before any
view, authentication included, can look at it: an anonymous client could make the server read
and store gigabytes. This wraps the whole application: a body that declares a length past the
limit is answered 413 without a byte read, and one that does not declare it (chunked) is cut
off, and answered 413, as soon as it passes the limit. `larger` gives a few (method, path)
pairs a limit of their own, for a request that `entitled` admits (its headers only, before a byte
of the body): anyone else's body there has the ordinary limit.
"""

import json
from collections.abc import Awaitable, Callable

REFUSED = {"error": {"code": "request_too_large", "message": "The request body is larger than {limit} bytes.",
                     "type": "invalid_request_error", "param": None}}


def body_limited(app, *, limit: int, larger: dict[tuple[str, str], int] | None = None,
                 entitled: Callable[[dict], Awaitable[bool]] | None = None):
    async def application(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        allowed = (larger or {}).get((scope["method"], scope["path"]), limit)
        if allowed > limit and entitled is not None and not await entitled(scope):
            allowed = limit
        await limited(scope, receive, send, allowed)

    async def limited(scope, receive, send, limit: int):
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            return await _refuse(send, limit)
        received, answered = 0, False

        async def counted_receive():
            nonlocal received, answered
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit and not answered:
                    answered = True
                    await _refuse(send, limit)
                    return {"type": "http.disconnect"}  # the application stops reading, as for a client gone
            return message

        async def guarded_send(message):
            if not answered:  # after the refusal, whatever the application still says goes nowhere
                await send(message)

        try:
            await app(scope, counted_receive, guarded_send)
        except Exception:
            if not answered:
                raise
            # The application noticed the cut (Starlette raises ClientDisconnect): already answered.

    return application


async def _refuse(send, limit: int) -> None:
    body = json.dumps(REFUSED).replace("{limit}", str(limit)).encode()
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
