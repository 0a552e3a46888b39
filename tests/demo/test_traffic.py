"""The traffic driver (demo.traffic) against in-memory stand-ins of the platform: its scheduling,
background tasks, reactions, failures, seeds and summary; and the command that starts it, with
the arguments it reads and those it refuses."""

import re
from collections import Counter

import pytest

from demo.domain import parse_prompt
from demo.personas import Persona
from demo.traffic import OrgTraffic, SimulatedOrg, format_summary, run_traffic
from demo.traffic.__main__ import parse_args
from demo.traffic.driver import USERS, plan_jobs
from demo.traffic.stats import percentile
from demo.traffic.transports import Tenant
from tests.demo.pinned_persona import STRICT
from tests.demo.traffic_fakes import FakeApi, FakeChat, pleasing_edit, types


def drive(orgs: dict[str, tuple[FakeChat, FakeApi]], persona: Persona = STRICT, **options) -> dict[str, OrgTraffic]:
    """run_traffic over in-memory tenants, one per organization name."""
    tenants = {f"key-{name}": Tenant(chat=chat, api=api) for name, (chat, api) in orgs.items()}
    settings = {"requests": 20, "concurrency": 3, "seed": 0, "time_scale": 0.0, "task_share": 0.0, **options}
    return run_traffic(
        url="http://platform.invalid", orgs=[SimulatedOrg(name, persona, f"key-{name}") for name in orgs],
        connect=lambda *, url, api_key, model: tenants[api_key], **settings,
    )


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
    chat, api = FakeChat(answer=pleasing_edit), FakeApi()
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
    assert 0 < clear < 40 and (traffic.clear_requests, traffic.persisted_on_clear) == (clear, clear)
    assert traffic.edit_persisted_on_clear_rate == 1.0


def test_background_task_steps_share_a_task_id_and_get_one_late_outcome_and_no_step_feedback():
    chat, api = FakeChat(answer=pleasing_edit), FakeApi()
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
