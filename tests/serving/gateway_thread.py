"""The platform's ASGI application under uvicorn, in a thread of the test process (the session's
`gateway_server` fixture), on an event loop of its own that tests can reach."""

import asyncio
import threading
import time

import uvicorn

from serving.vllm_process import free_port


class GatewayServer:
    def __init__(self):
        from controlplane.asgi import application

        self.port = free_port()
        self._server = uvicorn.Server(uvicorn.Config(application, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on"))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(self._server.serve(),), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "GatewayServer":
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            assert time.monotonic() < deadline and self._thread.is_alive(), "uvicorn did not start"
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def stop_watching(self) -> None:
        """Stop the replica watcher the first completion started: it reads the database every
        second, and on PostgreSQL such a read can deadlock with the TRUNCATE that empties the
        tables after a transactional test. The next completion starts it again."""
        from serving.gateway import upstream

        asyncio.run_coroutine_threadsafe(upstream.close(), self._loop).result(timeout=10)


running: GatewayServer | None = None  # the session's, once a test asked for it


def stop_watching() -> None:
    if running is not None:
        running.stop_watching()
