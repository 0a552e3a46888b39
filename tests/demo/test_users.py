"""Simulated users against SPEC 6.5 and 6.6, with the noise pinned so each case has one outcome."""

import dataclasses
import random

import pytest

from demo.domain import (
    FILES, Prompt, Style, parse_prompt, render_ask, render_edit, render_function, render_prompt, task_by_words,
)
from demo.domain.generate import sample_prompt, sample_response
from demo.personas import (
    EVENT_TYPES, FeedbackEvent, Persona, feedback_for, load_personas, sample_background_task,
    task_outcome_event, task_outcome_for,
)
from tests.demo.pinned_persona import DELAYS, NO_NOISE, PLEASING, STRICT

SUM_LIST = task_by_words("sum list")
CLEAR = render_prompt(Prompt(SUM_LIST, "utils.py"))
AMBIGUOUS = render_prompt(Prompt(SUM_LIST, None))


def written(style: Style = PLEASING, file: str = "utils.py", words: str = "sum list", body: str | None = None) -> str:
    task = dataclasses.replace(SUM_LIST, words=words, body=body or SUM_LIST.body)
    return render_edit(file, render_function(task, style))


def types(events: list[FeedbackEvent]) -> list[str]:
    return [event.type for event in events]


def feedback(response: str, prompt: str = CLEAR, persona: Persona = STRICT, seed: int = 0) -> list[FeedbackEvent]:
    return feedback_for(persona, prompt, response, random.Random(seed))


def test_an_invalid_tool_call_makes_the_tool_runner_fail():
    assert types(feedback("Sure, here it is: " + written())) == ["tool_call_invalid"]


@pytest.mark.parametrize("wrong", [
    {"body": "return max(xs)"},
    {"words": "total sum"},
    {"file": "core.py"},
])
def test_a_wrong_body_function_or_file_is_rejected_with_a_dissatisfied_followup(wrong):
    assert types(feedback(written(**wrong))) == ["edit_rejected", "dissatisfied_followup"]


def test_any_edit_on_an_ambiguous_prompt_is_rejected_as_a_wrong_file():
    assert types(feedback(written(), prompt=AMBIGUOUS)) == ["edit_rejected", "dissatisfied_followup"]


def test_a_correct_edit_breaking_a_required_preference_is_rejected():
    camel = dataclasses.replace(PLEASING, naming="camel")
    assert types(feedback(written(camel))) == ["edit_rejected", "dissatisfied_followup"]
    quiet = dataclasses.replace(STRICT, noise=dataclasses.replace(NO_NOISE, followup_after_required_miss=0.0))
    assert types(feedback(written(camel), persona=quiet)) == ["edit_rejected"]


def test_a_correct_edit_meeting_every_preference_is_accepted_now_and_persists_later():
    accepted, persisted = feedback(written())
    assert (accepted.type, accepted.delay_s) == ("edit_accepted", 0.0)
    assert persisted.type == "edit_persisted" and 1000.0 <= persisted.delay_s <= 2000.0


def test_a_correct_edit_missing_a_soft_preference_is_accepted_and_later_reverted():
    undocumented = dataclasses.replace(PLEASING, docstring="no")
    assert types(feedback(written(undocumented))) == ["edit_accepted", "edit_reverted"]


def test_the_noise_can_revert_a_pleasing_edit_and_keep_a_soft_miss():
    flipped = dataclasses.replace(NO_NOISE, revert_when_satisfied=1.0, persist_when_soft_miss=1.0)
    contrary = dataclasses.replace(STRICT, noise=flipped)
    assert types(feedback(written(), persona=contrary)) == ["edit_accepted", "edit_reverted"]
    undocumented = dataclasses.replace(PLEASING, docstring="no")
    assert types(feedback(written(undocumented), persona=contrary)) == ["edit_accepted", "edit_persisted"]


def test_an_ask_on_an_ambiguous_prompt_gets_its_clarification():
    (answered,) = feedback(render_ask("Which file?"), prompt=AMBIGUOUS)
    assert answered.type == "clarification_answered" and 30.0 <= answered.delay_s <= 40.0


def test_an_ask_on_a_clear_prompt_gets_a_dissatisfied_followup_unless_the_noise_spares_it():
    (followup,) = feedback(render_ask("Which file?"))
    assert followup.type == "dissatisfied_followup" and 10.0 <= followup.delay_s <= 20.0
    patient = dataclasses.replace(STRICT, noise=dataclasses.replace(NO_NOISE, followup_after_clear_ask=0.0))
    assert feedback(render_ask("Which file?"), persona=patient) == []


def test_an_interrupting_user_reports_only_the_interruption():
    impatient = dataclasses.replace(STRICT, noise=dataclasses.replace(NO_NOISE, interrupt=1.0))
    assert feedback(written(), persona=impatient) == [FeedbackEvent("interrupted", 0.0)]


def test_a_prompt_the_simulated_user_could_not_have_written_is_an_error():
    with pytest.raises(ValueError):
        feedback(written(), prompt="Please write sum_list.")


def test_an_event_type_the_platform_does_not_know_is_refused():
    with pytest.raises(ValueError):
        FeedbackEvent("edit_liked", 0.0)


def test_the_shipped_personas_load_and_differ_in_what_they_require():
    personas = load_personas()
    assert len(personas) >= 4
    assert len({tuple(sorted(persona.required.items())) for persona in personas.values()}) == len(personas)
    assert Persona.load("typed_snake").required == {"naming": "snake", "hints": "yes"}
    with pytest.raises(KeyError):
        Persona.load("nobody")


def test_a_persona_overrides_the_default_noise_key_by_key():
    easygoing, typed_snake = Persona.load("easygoing").noise, Persona.load("typed_snake").noise
    assert easygoing.followup_after_clear_ask != typed_snake.followup_after_clear_ask
    assert easygoing.interrupt == typed_snake.interrupt


@pytest.mark.parametrize("change", [
    {"required": {"naming": "kebab"}},
    {"soft": {"colour": "blue"}},
    {"required": {"naming": "snake"}, "soft": {"naming": "camel"}},
])
def test_a_persona_with_impossible_preferences_is_refused(change):
    with pytest.raises(ValueError):
        dataclasses.replace(STRICT, **change)


def test_noise_outside_zero_to_one_and_backward_delays_are_refused():
    with pytest.raises(ValueError):
        dataclasses.replace(NO_NOISE, interrupt=1.5)
    with pytest.raises(ValueError):
        dataclasses.replace(DELAYS, settle=(10.0, 5.0))


def test_every_event_a_shipped_persona_gives_on_base_traffic_is_a_platform_event_with_its_timing():
    rng = random.Random(5)
    seen = set()
    for persona in load_personas().values():
        for _ in range(500):
            prompt = sample_prompt(rng)
            for event in feedback_for(persona, render_prompt(prompt), sample_response(rng, prompt), rng):
                seen.add(event.type)
                immediate = event.type in {"edit_accepted", "edit_rejected", "tool_call_invalid", "interrupted"}
                assert (event.delay_s == 0.0) == immediate
    assert seen <= set(EVENT_TYPES) - {"task_outcome"}
    assert {"edit_accepted", "edit_persisted", "edit_reverted", "clarification_answered"} <= seen


def test_a_background_task_asks_for_two_to_four_distinct_functions_in_one_file():
    rng = random.Random(6)
    sizes = set()
    for _ in range(200):
        prompts = [parse_prompt(text) for text in sample_background_task(rng)]
        sizes.add(len(prompts))
        assert len({prompt.task for prompt in prompts}) == len(prompts)
        assert len({prompt.file for prompt in prompts}) == 1 and prompts[0].file in FILES
    assert sizes == {2, 3, 4}


def answered(prompts: tuple[str, ...], style: Style = PLEASING) -> list[tuple[str, str]]:
    steps = []
    for text in prompts:
        prompt = parse_prompt(text)
        steps.append((text, render_edit(prompt.file, render_function(prompt.task, style))))
    return steps


def test_a_background_task_succeeds_when_every_function_is_correct_and_meets_the_required_preferences():
    steps = answered(sample_background_task(random.Random(7)), dataclasses.replace(PLEASING, docstring="no"))
    assert task_outcome_for(STRICT, steps) == 1.0  # a soft miss does not fail the task
    event = task_outcome_event(STRICT, steps, random.Random(0))
    assert event.type == "task_outcome" and event.value == 1.0 and 5000.0 <= event.delay_s <= 6000.0


def test_a_background_task_fails_when_one_step_is_wrong_misses_a_requirement_or_asks():
    steps = answered(sample_background_task(random.Random(8)))
    assert task_outcome_for(STRICT, steps) == 1.0
    text = steps[-1][0]
    last = parse_prompt(text)
    camel = dataclasses.replace(PLEASING, naming="camel")
    for wrong in (
        render_edit("nowhere.py", render_function(last.task, PLEASING)),
        render_edit(last.file, render_function(last.task, camel)),
        render_ask("Which file?"),
    ):
        assert task_outcome_for(STRICT, steps[:-1] + [(text, wrong)]) == 0.0


def test_a_background_task_without_steps_is_an_error():
    with pytest.raises(ValueError):
        task_outcome_for(STRICT, [])


def test_the_simulated_users_send_only_event_types_the_platform_knows():
    from tenants.models import FeedbackEvent

    assert set(EVENT_TYPES) == set(FeedbackEvent.Type.values)
