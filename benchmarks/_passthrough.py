"""A bare relay in front of vLLM: each chat completion forwarded as it came, nothing parsed,
checked or recorded. serving_figures.py runs it where the gateway runs (a process of its own,
the web server's core), so that the gateway's throughput can be set against one more hop that
does no work: on vLLM-CPU, requests relayed arrive and batch differently, whatever the relay.
Not used by any test.

    UPSTREAM=http://127.0.0.1:8000 PORT=8002 python benchmarks/_passthrough.py
"""

import os

import aiohttp
from aiohttp import web

UPSTREAM = os.environ["UPSTREAM"]


async def relay(request: web.Request) -> web.Response:
    headers = {"Authorization": request.headers.get("Authorization", ""), "Content-Type": "application/json"}
    async with request.app["upstream"].post(f"{UPSTREAM}/v1/chat/completions", data=await request.read(), headers=headers) as answer:
        return web.Response(body=await answer.read(), status=answer.status, content_type="application/json")


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _session(app: web.Application):
    app["upstream"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256))
    yield
    await app["upstream"].close()


def main() -> None:
    app = web.Application()
    app.cleanup_ctx.append(_session)
    app.router.add_post("/v1/chat/completions", relay)
    app.router.add_get("/healthz", healthz)
    web.run_app(app, host="127.0.0.1", port=int(os.environ["PORT"]), print=None, access_log=None)


if __name__ == "__main__":
    main()
