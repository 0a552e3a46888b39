"""The traffic driver's outbox (demo.traffic.outbox): it sends feedback events and task outcomes
when their scaled delays fall due, in batches of at most 1000, retrying what may pass on a later
try and counting what the platform refuses, and drains with or without waiting."""

import time
import urllib.error
import uuid
from datetime import datetime

import pytest

from demo.http import ApiError
from demo.traffic.outbox import Feedback, Outbox, Outcome, idempotency_key
from demo.traffic.transports import Retry
from tests.demo.traffic_fakes import EVENT_FIELDS, Clock, FakeApi, types

NO_RETRY_WAIT = Retry(attempts=3, backoff_s=0.0)


def manual_outbox(api: FakeApi, clock: Clock, time_scale: float = 0.001) -> Outbox:
    """An outbox whose sending the test drives itself, on a clock it sets."""
    return Outbox(api, time_scale=time_scale, retry=NO_RETRY_WAIT, linger_s=0.0, clock=clock)


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
