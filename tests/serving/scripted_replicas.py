"""Stand-ins for vLLM replicas: real HTTP servers on loopback ports, each answering as its
test scripts it, so that the gateway's client meets real connections refused, closed unanswered
or cut off mid-answer. They run on an event loop of their own, in a thread."""

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from serving.vllm_process import free_port


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: object = None  # sent as JSON; a str as text
    delay_s: float = 0.0  # waited before answering
    hang_up: bool = False  # the connection closed without an answer
    cut_off: bool = False  # a 200 whose body stops half-way, the connection closed


# A replica's script: (path, JSON body or None) -> its answer.
Script = Callable[[str, dict | None], Answer]


class ScriptedReplicas:
    def __init__(self, names: list[str]):
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, daemon=True).start()
        self.ports = {name: free_port() for name in names}
        self.scripts: dict[str, Script] = {}
        self.received: list[tuple[str, str]] = []  # (replica, path) of each request answered or refused with a status
        self._runners: dict[str, web.AppRunner] = {}
        for name in names:
            self.start(name)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    def start(self, name: str) -> None:
        self._run(self._start(name))

    def stop(self, name: str) -> None:
        """Down: its port refuses connections, its open ones are closed."""
        self._run(self._runners.pop(name).cleanup())

    def close(self) -> None:
        for name in list(self._runners):
            self.stop(name)
        self._run(self._cancel_the_rest())
        self._loop.call_soon_threadsafe(self._loop.stop)

    @staticmethod
    async def _cancel_the_rest() -> None:
        """Answers still waiting out a delay: ended here rather than destroyed with the loop."""
        rest = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def _run(self, work) -> None:
        asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout=10)

    async def _start(self, name: str) -> None:
        async def answer(request: web.Request) -> web.StreamResponse:
            return await self._answer(name, request)

        app = web.Application()
        app.router.add_route("*", "/{path:.*}", answer)
        runner = web.AppRunner(app, shutdown_timeout=0.1)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.ports[name]).start()
        self._runners[name] = runner

    async def _answer(self, name: str, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        answer = self.scripts[name](request.path, json.loads(raw) if raw else None)
        await asyncio.sleep(answer.delay_s)
        if answer.hang_up:
            request.transport.close()
            return web.Response()  # never sent: the connection is gone
        self.received.append((name, request.path))
        if answer.cut_off:
            response = web.StreamResponse(status=200, headers={"Content-Length": "1000"})
            await response.prepare(request)
            await response.write(b'{"choices": [')
            request.transport.close()
            return response
        if isinstance(answer.body, str):
            return web.Response(status=answer.status, text=answer.body)
        return web.json_response(answer.body, status=answer.status)
