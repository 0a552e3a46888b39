"""The traffic driver: its scheduling, batching, retries and accounting against in-memory
stand-ins of the platform, and its wire format through the real openai client against a small
local HTTP server that plays the gateway and the tenant API."""

import json
import random
import re
import threading
import time
import urllib.error
import uuid
from collections import Counter
from collections.abc import Sequence
from contextlib import contextmanager
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NamedTuple

import pytest

from demo.domain import parse_prompt, render_edit, render_function
from demo.domain.generate import sample_response
from demo.http import ApiError
from demo.personas import Persona
from demo.traffic import OrgTraffic, SimulatedOrg, format_summary, run_traffic
from demo.traffic.__main__ import parse_args
from demo.traffic.driver import USERS, plan_jobs
from demo.traffic.outbox import Feedback, Outbox, Outcome, idempotency_key
from demo.traffic.stats import percentile
from demo.traffic.transports import ChatFailed, Retry, Served, Tenant
from tests.demo.pinned_persona import PLEASING, STRICT

NO_RETRY_WAIT = Retry(attempts=3, backoff_s=0.0)
# The fields of a feedback event in SPEC 8.
EVENT_FIELDS = {"interaction_id", "type", "idempotency_key", "value", "occurred_at"}


class FakeApi:
    """The tenant REST API in memory: records each POST, fails as told, else answers like the platform."""

    def __init__(self, failures: Sequence[Exception] = ()):
        self.posts: list[tuple[str, dict, float]] = []  # path, body, when (monotonic)
        self._failures = list(failures)
        self._lock = threading.Lock()

    def post(self, path: str, body: dict) -> dict:
        with self._lock:
            self.posts.append((path, json.loads(json.dumps(body)), time.monotonic()))
            if self._failures:
                raise self._failures.pop(0)
        return {"id": str(uuid.uuid4())} if path == "/api/v1/tasks" else {}

    def batches(self) -> list[list[dict]]:
        return [body["events"] for path, body, _ in self.posts if path == "/api/v1/feedback"]

    def events(self) -> list[dict]:
        return [event for batch in self.batches() for event in batch]

    def outcomes(self) -> list[tuple[str, dict]]:
        return [(path, body) for path, body, _ in self.posts if path.endswith("/outcome")]


class ChatCall(NamedTuple):
    prompt: str
    user: str
    task_id: str | None
    interaction_id: str


class FakeChat:
    """The gateway in memory. `answer` writes the response to a prompt text."""

    def __init__(self, answer=None, model: str = "acme@v1", fail_every: int = 0):
        self.calls: list[ChatCall] = []
        self.answer = answer or _base_policy
        self.model, self.fail_every = model, fail_every
        self._lock = threading.Lock()

    def __call__(self, *, prompt: str, user: str, task_id: str | None) -> Served:
        interaction_id = str(uuid.uuid4())
        with self._lock:
            self.calls.append(ChatCall(prompt, user, task_id, interaction_id))
            if self.fail_every and len(self.calls) % self.fail_every == 0:
                raise ChatFailed("429")
        return Served(interaction_id, self.model, self.answer(prompt))


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _base_policy(prompt: str) -> str:
    """The base corpus's answer, the same one each time a prompt is asked."""
    return sample_response(random.Random(prompt), parse_prompt(prompt))


def _pleasing_edit(prompt: str) -> str:
    """A correct edit pleasing STRICT, to the prompt's file (a guess, so wrong, when ambiguous)."""
    parsed = parse_prompt(prompt)
    return render_edit(parsed.file or "utils.py", render_function(parsed.task, PLEASING))


def types(events: list[dict]) -> list[str]:
    return [event["type"] for event in events]


def manual_outbox(api: FakeApi, clock: Clock, time_scale: float = 0.001) -> Outbox:
    """An outbox whose sending the test drives itself, on a clock it sets."""
    return Outbox(api, time_scale=time_scale, retry=NO_RETRY_WAIT, linger_s=0.0, clock=clock)


def drive(orgs: dict[str, tuple[FakeChat, FakeApi]], persona: Persona = STRICT, **options) -> dict[str, OrgTraffic]:
    """run_traffic over in-memory tenants, one per organization name."""
    tenants = {f"key-{name}": Tenant(chat=chat, api=api) for name, (chat, api) in orgs.items()}
    settings = {"requests": 20, "concurrency": 3, "seed": 0, "time_scale": 0.0, "task_share": 0.0, **options}
    return run_traffic(
        url="http://platform.invalid", orgs=[SimulatedOrg(name, persona, f"key-{name}") for name in orgs],
        connect=lambda *, url, api_key, model: tenants[api_key], **settings,
    )


# The outbox ----------------------------------------------------------------------------------

def test_it_sends_delayed_events_after_their_scaled_delay():
    api, clock = FakeApi(), Clock()
    outbox = manual_outbox(api, clock, time_scale=0.001)
    outbox.schedule(Feedback("i-1", "edit_accepted"), delay_s=0)
    outbox.schedule(Feedback("i-1", "edit_persisted"), delay_s=3600)  # an hour: 3.6 s at this scale
    outbox.send_due()
    clock.now = 3.59
    outbox.send_due()
    assert [types(batch) for batch in api.batches()] == [["edit_accepted"]]
    clock.now = 3.6
    outbox.send_due()
    assert [types(batch) for batch in api.batches()] == [["edit_accepted"], ["edit_persisted"]]
    assert outbox.pending == 0


def test_it_sends_due_events_in_the_order_they_fall_due():
    api, clock = FakeApi(), Clock()
    outbox = manual_outbox(api, clock, time_scale=1.0)
    for interaction, delay in (("late", 30), ("early", 10), ("middle", 20), ("early-too", 10)):
        outbox.schedule(Feedback(interaction, "dissatisfied_followup"), delay_s=delay)
    clock.now = 30
    outbox.send_due()
    assert [event["interaction_id"] for event in api.events()] == ["early", "early-too", "middle", "late"]


def test_a_batch_holds_at_most_1000_events():
    api, clock = FakeApi(), Clock()
    outbox = manual_outbox(api, clock)
    for index in range(2500):
        outbox.schedule(Feedback(f"i-{index}", "edit_accepted"), delay_s=0)
    outbox.send_due()
    assert [len(batch) for batch in api.batches()] == [1000, 1000, 500]
    assert outbox.delivery.sent == {"edit_accepted": 2500}


def test_each_event_carries_a_key_naming_its_interaction_and_type_and_a_time_with_a_zone():
    api, clock = FakeApi(), Clock()
    outbox = manual_outbox(api, clock)
    interaction = str(uuid.uuid4())
    outbox.schedule(Feedback(interaction, "edit_accepted"), delay_s=0)
    outbox.send_due()
    (event,) = api.events()
    assert event.keys() <= EVENT_FIELDS
    assert event["idempotency_key"] == idempotency_key(interaction, "edit_accepted")
    assert datetime.fromisoformat(event["occurred_at"]).tzinfo is not None


def test_idempotency_keys_are_the_same_for_one_event_and_differ_between_events():
    interaction, other = str(uuid.uuid4()), str(uuid.uuid4())
    key = idempotency_key(interaction, "edit_persisted")
    assert key == idempotency_key(interaction, "edit_persisted")
    assert key not in {idempotency_key(interaction, "edit_reverted"), idempotency_key(other, "edit_persisted")}
    assert len(key) <= 200  # the platform's limit


def test_a_batch_failing_with_a_server_or_network_error_is_sent_again_unchanged():
    api, clock = FakeApi(failures=[ApiError(503, {}), urllib.error.URLError("connection refused")]), Clock()
    outbox = manual_outbox(api, clock)
    outbox.schedule(Feedback("i-1", "edit_accepted"), delay_s=0)
    outbox.schedule(Feedback("i-1", "edit_persisted"), delay_s=0)
    outbox.send_due()
    first, second, third = api.batches()
    assert first == second == third
    assert outbox.delivery.sent == {"edit_accepted": 1, "edit_persisted": 1}
    assert not outbox.delivery.failed


def test_a_batch_the_platform_refuses_is_counted_as_failed_and_not_sent_again():
    api, clock = FakeApi(failures=[ApiError(400, {"error": {"message": "bad"}})]), Clock()
    outbox = manual_outbox(api, clock)
    outbox.schedule(Feedback("i-1", "edit_rejected"), delay_s=0)
    outbox.schedule(Feedback("i-1", "dissatisfied_followup"), delay_s=0)
    outbox.send_due()
    assert len(api.batches()) == 1
    assert outbox.delivery.failed == {"feedback 400": 2}
    assert not outbox.delivery.sent


def test_a_batch_still_failing_after_the_last_retry_is_counted_as_failed():
    api, clock = FakeApi(failures=[ApiError(502, {})] * NO_RETRY_WAIT.attempts), Clock()
    outbox = manual_outbox(api, clock)
    outbox.schedule(Feedback("i-1", "edit_accepted"), delay_s=0)
    outbox.send_due()
    assert len(api.batches()) == NO_RETRY_WAIT.attempts
    assert outbox.delivery.failed == {"feedback 502": 1}


def test_a_task_outcome_goes_to_its_task_with_its_value():
    api, clock = FakeApi(), Clock()
    outbox = manual_outbox(api, clock)
    outbox.schedule(Outcome("t-1", 1.0), delay_s=0)
    outbox.send_due()
    assert api.outcomes() == [("/api/v1/tasks/t-1/outcome", {"value": 1.0, "idempotency_key": "t-1:task_outcome"})]
    assert outbox.delivery.outcomes == [1.0]
    assert outbox.delivery.sent == {"task_outcome": 1}


def test_draining_without_waiting_sends_everything_at_once():
    api = FakeApi()
    outbox = Outbox(api, time_scale=1.0, linger_s=0.0).start()  # real time: hours away
    outbox.schedule(Feedback("i-1", "edit_persisted"), delay_s=14400)
    outbox.schedule(Outcome("t-1", 0.0), delay_s=21600)
    started = time.monotonic()
    outbox.drain(wait=False)
    assert time.monotonic() - started < 1.0
    assert outbox.pending == 0
    assert outbox.delivery.sent == {"edit_persisted": 1, "task_outcome": 1}


def test_draining_waits_for_each_delayed_event_until_its_time():
    api = FakeApi()
    outbox = Outbox(api, time_scale=0.001, linger_s=0.0).start()
    scheduled_at = time.monotonic()
    delays = {"edit_accepted": 0, "dissatisfied_followup": 50, "edit_persisted": 150}  # 0, 0.05 and 0.15 s
    for event_type, delay in delays.items():
        outbox.schedule(Feedback("i-1", event_type), delay_s=delay)
    outbox.drain(wait=True)
    sent_at = {event["type"]: when for path, body, when in api.posts for event in body["events"]}
    assert sent_at.keys() == delays.keys()
    for event_type, delay in delays.items():
        assert sent_at[event_type] >= scheduled_at + delay * 0.001


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the death itself
def test_a_sender_that_died_makes_draining_fail_instead_of_looking_finished():
    api = FakeApi(failures=[ValueError("not JSON")])  # no transient failure: a bug to surface
    outbox = Outbox(api, time_scale=0.0, linger_s=0.0).start()
    outbox.schedule(Feedback("i-1", "edit_accepted"), delay_s=0)
    with pytest.raises(RuntimeError, match="stopped"):
        outbox.drain(wait=True)


# The driver ----------------------------------------------------------------------------------

def test_it_makes_exactly_the_requested_calls_for_each_organization_through_its_own_tenant():
    acme, globex = (FakeChat(model="acme@v1"), FakeApi()), (FakeChat(model="globex@v3"), FakeApi())
    traffic = drive({"acme": acme, "globex": globex}, requests=30, task_share=0.3)
    assert [len(chat.calls) for chat, _ in (acme, globex)] == [30, 30]
    assert traffic["acme"].served == 30 and traffic["acme"].by_model == {"acme@v1": 30}
    assert traffic["globex"].by_model == {"globex@v3": 30}
    assert {call.user for call in acme[0].calls} <= {f"user-{k}" for k in range(USERS)}
    assert len(traffic["acme"].latencies_ms) == 30


def test_every_response_gets_its_users_reactions_and_the_rates_count_them():
    chat, api = FakeChat(answer=_pleasing_edit), FakeApi()
    traffic = drive({"acme": (chat, api)}, requests=40)["acme"]
    clear = sum(not parse_prompt(call.prompt).ambiguous for call in chat.calls)
    # STRICT keeps a correct pleasing edit; the same edit is a wrong guess on an ambiguous prompt.
    assert traffic.events == {
        "edit_accepted": clear, "edit_persisted": clear,
        "edit_rejected": 40 - clear, "dissatisfied_followup": 40 - clear,
    }
    assert Counter(types(api.events())) == traffic.events
    assert traffic.edit_persisted_rate == clear / 40
    assert traffic.dissatisfied_rate == (40 - clear) / 40


def test_background_task_steps_share_a_task_id_and_get_one_late_outcome_and_no_step_feedback():
    chat, api = FakeChat(answer=_pleasing_edit), FakeApi()
    traffic = drive({"acme": (chat, api)}, requests=40, task_share=1.0)["acme"]
    steps = Counter(call.task_id for call in chat.calls if call.task_id)
    assert all(2 <= count <= 4 for count in steps.values())
    assert sum(steps.values()) >= 39  # a lone last call is no task
    assert traffic.tasks == len(steps)
    assert sorted(path for path, _ in api.outcomes()) == sorted(f"/api/v1/tasks/{task}/outcome" for task in steps)
    step_ids = {call.interaction_id for call in chat.calls if call.task_id}
    assert not step_ids & {event["interaction_id"] for event in api.events()}
    assert traffic.task_outcomes == [1.0] * len(steps)  # every step a correct edit STRICT keeps
    assert traffic.requests == 40 - sum(steps.values()) and traffic.task_successes == len(steps)


def test_the_task_share_is_the_share_of_calls_made_in_background_tasks():
    jobs = plan_jobs(org="acme", requests=3000, task_share=0.3, seed=0)
    assert sum(len(job.prompts) for job in jobs) == 3000
    in_tasks = sum(len(job.prompts) for job in jobs if job.background)
    assert 0.25 < in_tasks / 3000 < 0.35


def test_a_seed_replays_the_same_prompts_users_and_reactions():
    def run(seed: int) -> tuple[list, Counter]:
        chat, api = FakeChat(), FakeApi()
        drive({"acme": (chat, api)}, requests=40, concurrency=4, seed=seed, task_share=0.2)
        return sorted((call.prompt, call.user) for call in chat.calls), Counter(types(api.events()))

    assert run(7) == run(7)
    assert run(7)[0] != run(8)[0]


def test_chat_calls_that_fail_for_good_are_counted_by_status():
    chat, api = FakeChat(fail_every=4), FakeApi()
    traffic = drive({"acme": (chat, api)}, requests=20, concurrency=1)["acme"]
    assert traffic.failures == {"chat 429": 5}
    assert traffic.served == 15


def test_the_summary_is_one_aligned_table_per_organization():
    traffic = drive({"acme": (FakeChat(), FakeApi())}, requests=10, task_share=0.5)["acme"]
    title, *rows = format_summary(traffic).splitlines()
    assert title == "acme (persona strict)"
    assert len({len(row) for row in rows}) == 1
    assert re.search(r"^served +10$", "\n".join(rows), re.MULTILINE)


def test_percentiles_are_nearest_rank_and_none_without_values():
    assert percentile(list(range(1, 101)), 0.5) == 50
    assert percentile(list(range(1, 101)), 0.95) == 95
    assert percentile([], 0.5) is None


# The command ---------------------------------------------------------------------------------

def test_the_command_reads_organizations_and_options():
    args = parse_args([
        "--url", "http://127.0.0.1:9000/", "--org", "acme=typed_snake=sk=with=equals", "--org", "globex=easygoing=k2",
        "--requests", "50", "--time-scale", "0", "--task-share", "0.25", "--no-wait",
    ])
    assert args.url == "http://127.0.0.1:9000"
    assert [(org.name, org.persona.name, org.api_key) for org in args.orgs] == [
        ("acme", "typed_snake", "sk=with=equals"), ("globex", "easygoing", "k2"),
    ]
    assert (args.requests, args.concurrency, args.time_scale, args.task_share, args.wait) == (50, 4, 0.0, 0.25, False)


@pytest.mark.parametrize(("argv", "message"), [
    ([], "the following arguments are required: --org"),
    (["--org", "acme=typed_snake"], "expected NAME=PERSONA=API_KEY"),
    (["--org", "acme=typed_snake="], "empty API_KEY"),
    (["--org", "acme=nobody=sk-secret"], "no persona 'nobody'"),
    (["--org", "acme=typed_snake=k", "--org", "acme=easygoing=k"], "acme given more than once"),
    (["--org", "acme=typed_snake=k", "--requests", "0"], "--requests: must be at least 1"),
    (["--org", "acme=typed_snake=k", "--concurrency", "two"], "--concurrency: expected an integer"),
    (["--org", "acme=typed_snake=k", "--time-scale", "-1"], "--time-scale: must be a finite number, 0 or more"),
    (["--org", "acme=typed_snake=k", "--task-share", "1.5"], "--task-share: must lie between 0 and 1"),
    (["--org", "acme=typed_snake=k", "--url", "127.0.0.1:8000"], "--url: expected an http(s) URL"),
])
def test_the_command_refuses_bad_arguments_saying_why(argv, message, capsys):
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert message in error
    assert "sk-secret" not in error


# On the wire ---------------------------------------------------------------------------------

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
                         "message": {"role": "assistant", "content": _pleasing_edit(prompt)}}],
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
