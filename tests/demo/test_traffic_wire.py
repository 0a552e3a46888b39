"""The traffic driver on the wire: through the real openai client against a small local HTTP
server that stands in for the gateway and the tenant API, it sends the requests, feedback
events and task outcomes of the public contract (SPEC 8)."""

import json
import re
import threading
import time
import uuid
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from demo.domain import parse_prompt
from demo.traffic import SimulatedOrg, run_traffic
from tests.demo.pinned_persona import STRICT
from tests.demo.traffic_fakes import EVENT_FIELDS, pleasing_edit


class StandInPlatform(BaseHTTPRequestHandler):
    """A stand-in for the gateway and the tenant API, not the platform: it answers in the shapes
    of SPEC 8 and records what arrived. The first chat call is refused with 429, as the gateway
    does when an organization exceeds its limits."""

    received: list[tuple[str, str, dict]]  # path, Authorization header, JSON body
    tasks: list[str]
    responses: list[str]  # the chat responses' ids
    lock = threading.Lock()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.lock:
            self.received.append((self.path, self.headers["Authorization"], body))
            first_chat = sum(path == "/v1/chat/completions" for path, _, _ in self.received) == 1
        if self.path == "/v1/chat/completions" and first_chat:
            self._answer(429, {"error": {"message": "slow down"}}, {"retry-after-ms": "10"})
        elif self.path == "/v1/chat/completions":
            self._answer(200, self._completion(body["messages"][-1]["content"]))
        elif self.path == "/api/v1/tasks":
            self.tasks.append(str(uuid.uuid4()))
            self._answer(201, {"id": self.tasks[-1]})
        else:
            self._answer(201 if self.path.endswith("/outcome") else 200, {})

    def _completion(self, prompt: str) -> dict:
        interaction = str(uuid.uuid4())
        self.responses.append(interaction)
        return {
            "id": interaction, "object": "chat.completion", "created": int(time.time()), "model": "acme@v2",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": pleasing_edit(prompt)}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 30, "total_tokens": 50},
        }

    def _answer(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", "Content-Length": str(len(raw)), **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args):
        pass


@contextmanager
def stand_in_platform():
    handler = type("Handler", (StandInPlatform,), {"received": [], "tasks": [], "responses": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_on_the_wire_it_speaks_the_public_contract_through_the_openai_client():
    with stand_in_platform() as (url, platform):
        traffic = run_traffic(url=url, orgs=[SimulatedOrg("acme", STRICT, "key-acme")], requests=10, concurrency=2,
                              seed=0, time_scale=0.0, task_share=0.5)["acme"]
    assert {auth for _, auth, _ in platform.received} == {"Bearer key-acme"}
    chats = [body for path, _, body in platform.received if path == "/v1/chat/completions"]
    assert len(chats) == 11  # one refused with 429 and retried by the client
    for chat in chats:
        assert chat["model"] == "default" and chat["temperature"] == 1.0 and chat["max_tokens"] > 0
        assert re.fullmatch(r"user-\d+", chat["user"])
        (message,) = chat["messages"]
        assert message["role"] == "user" and parse_prompt(message["content"])
    assert {chat["metadata"]["task_id"] for chat in chats if "metadata" in chat} == set(platform.tasks)
    events = [event for path, _, body in platform.received if path == "/api/v1/feedback" for event in body["events"]]
    assert events and all(event.keys() <= EVENT_FIELDS for event in events)
    assert {event["interaction_id"] for event in events} <= set(platform.responses)
    outcomes = [(path, body) for path, _, body in platform.received if path.endswith("/outcome")]
    assert sorted(path for path, _ in outcomes) == sorted(f"/api/v1/tasks/{task}/outcome" for task in platform.tasks)
    assert all(body.keys() == {"value", "idempotency_key"} for _, body in outcomes)
    assert traffic.served == 10 and traffic.by_model == {"acme@v2": 10} and not traffic.failures
    assert traffic.events["task_outcome"] == len(platform.tasks) > 0
