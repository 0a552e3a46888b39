"""The gateway's views without a model server: what becomes of a stream no client reads."""

import asyncio
import gc
import threading
import uuid
from contextlib import asynccontextmanager
from types import SimpleNamespace

from serving.gateway import upstream, views
from serving.gateway.server_timing import ServerTiming
from serving.routing import Target


class NotedAdmission:
    """An admission slot that notes the thread it is given back on."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop, self.released, self.threads = loop, asyncio.Event(), []

    def release(self, *, tokens: int = 0) -> None:
        self.threads.append(threading.get_ident())
        self.loop.call_soon_threadsafe(self.released.set)


def streamed_call() -> views.Call:
    request = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    return views.Call(org=SimpleNamespace(pk=uuid.uuid4()), request=request, target=Target(name="demo-base", adapter_path=None), task=None,
                      interaction_id="0", started=0.0, size=64)


def test_a_stream_dropped_unread_off_the_loop_is_given_back_on_the_loop(monkeypatch):
    closed = asyncio.Event()

    @asynccontextmanager
    async def completion(body, target):
        try:
            yield None
        finally:
            closed.set()

    monkeypatch.setattr(upstream, "completion", completion)

    def drop(streams: list) -> None:  # the last reference goes on another thread, as in a collection there
        streams.clear()
        gc.collect()

    async def scenario() -> list[int]:
        admission = NotedAdmission(asyncio.get_running_loop())
        streams = [await views._streamed(streamed_call(), admission, ServerTiming(0.0))]
        await asyncio.to_thread(drop, streams)
        await asyncio.wait_for(admission.released.wait(), timeout=10)
        await asyncio.wait_for(closed.wait(), timeout=10)  # the upstream response is closed too
        return admission.threads

    assert asyncio.run(scenario()) == [threading.get_ident()]  # asyncio.run runs its loop on this thread
