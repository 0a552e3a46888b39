"""Each simulated organization's traffic: planned from a seed, run by a pool of workers.

A plan is a list of jobs, each a single request or a background task of 2-4 steps (SPEC 6.6),
each for one end user of a small pool. Every job draws its users' reactions from its own
`random.Random`, seeded by (seed, organization, job), so the same seed replays the same
prompts, users and reactions to the same responses whatever the threads' order; only the
responses, sampled by the model at temperature 1, differ between runs.
"""

import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

from demo.domain import parse_prompt, render_prompt
from demo.domain.generate import sample_prompt
from demo.personas import (
    Persona,
    feedback_for,
    sample_background_task,
    task_outcome_event,
)
from demo.traffic.outbox import Feedback, Outbox, Outcome
from demo.traffic.stats import OrgTraffic
from demo.traffic.transports import (
    DEFAULT_RETRY,
    ChatFailed,
    Retry,
    Served,
    Tenant,
    Undelivered,
    connect,
    post_with_retries,
)

# End users per organization. Canary assignment is sticky per user, so the user count sets how
# near half a canary's split lands: within about 6 points at 256 (two standard deviations);
# with 32, one organization's canary got 70 calls to its incumbent's 159.
USERS = 256
MEAN_TASK_STEPS = 3  # sample_background_task's 2-4 functions

Connect = Callable[..., Tenant]  # connect(url=..., api_key=..., model=...), as transports.connect


@dataclass(frozen=True)
class SimulatedOrg:
    name: str
    persona: Persona  # whose users judge the responses
    api_key: str
    model: str = "default"  # what its agents ask the gateway for


@dataclass(frozen=True)
class Job:
    index: int  # its place in the plan, which seeds its users' reactions
    user: str  # the end user, sent as the OpenAI `user` field
    prompts: tuple[str, ...]  # one, or a background task's steps
    background: bool  # the steps share a task id and get one late outcome, no per-step feedback


@dataclass(frozen=True)
class Call:
    model: str
    latency_ms: float
    in_task: bool  # a background task's step: its user reports only the task's outcome


@dataclass
class JobResult:
    calls: list[Call] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # "<what> <status>"
    task_opened: bool = False
    clear: bool = False  # a single request on a clear prompt, answered
    persisted: bool = False  # ...whose user will keep the edit


def run_traffic(
    *, url: str, orgs: Sequence[SimulatedOrg], requests: int, concurrency: int = 4, seed: int = 0,
    time_scale: float = 0.001, task_share: float = 0.1, wait: bool = True, connect: Connect = connect,
) -> dict[str, OrgTraffic]:
    """Run `requests` gateway calls for each organization, all organizations at once, each with
    `concurrency` workers; then drain the feedback: each delayed event at its (scaled) time, or,
    when not `wait`, everything at once. Returns each organization's figures, by name.

    `task_share` is the share of calls made as steps of background tasks. A run that fails or
    is interrupted sends the feedback it has at once before it stops. `connect` makes an
    organization's clients from `url` and its key; tests pass in-memory ones.
    """
    if len({org.name for org in orgs}) != len(orgs):
        raise ValueError("organization names must be distinct")
    if concurrency < 1 or time_scale < 0:
        raise ValueError(f"need concurrency >= 1 and time_scale >= 0, not {concurrency}, {time_scale}")
    plans = {org.name: plan_jobs(org=org.name, requests=requests, task_share=task_share, seed=seed) for org in orgs}
    tenants = {org.name: connect(url=url, api_key=org.api_key, model=org.model) for org in orgs}
    outboxes = {org.name: Outbox(tenants[org.name].api, time_scale=time_scale).start() for org in orgs}
    try:
        with _worker_pools([org.name for org in orgs], concurrency) as pools:
            futures = {
                org.name: [
                    pools[org.name].submit(run_job, job, org=org, tenant=tenants[org.name], outbox=outboxes[org.name], seed=seed)
                    for job in plans[org.name]
                ]
                for org in orgs
            }
            results = {name: [future.result() for future in jobs] for name, jobs in futures.items()}
        _drain(outboxes.values(), wait=wait)
    except BaseException:  # Ctrl-C too: what the users did is sent before the run stops
        _drain(outboxes.values(), wait=False)
        raise
    return {org.name: tally(org=org, results=results[org.name], outbox=outboxes[org.name]) for org in orgs}


def plan_jobs(*, org: str, requests: int, task_share: float, seed: int, users: int = USERS) -> list[Job]:
    """Jobs adding up to exactly `requests` calls, about `task_share` of them in background tasks."""
    if requests < 0 or not 0.0 <= task_share <= 1.0:
        raise ValueError(f"need requests >= 0 and 0 <= task_share <= 1, not {requests}, {task_share}")
    rng = random.Random(f"{seed}:{org}:plan")
    # The chance that a job is a task, such that tasks hold `task_share` of the calls on average.
    task_chance = task_share / (MEAN_TASK_STEPS - (MEAN_TASK_STEPS - 1) * task_share)
    jobs: list[Job] = []
    calls = 0
    while calls < requests:
        user, left = f"user-{rng.randrange(users)}", requests - calls
        if left >= 2 and rng.random() < task_chance:
            job = Job(len(jobs), user, sample_background_task(rng)[:left], background=True)
        else:
            job = Job(len(jobs), user, (render_prompt(sample_prompt(rng)),), background=False)
        jobs.append(job)
        calls += len(job.prompts)
    return jobs


def run_job(job: Job, *, org: SimulatedOrg, tenant: Tenant, outbox: Outbox, seed: int, retry: Retry = DEFAULT_RETRY) -> JobResult:
    """Make the job's calls and schedule what its user reports about them."""
    rng = random.Random(f"{seed}:{org.name}:{job.index}")
    if job.background:
        return _background_task(job, org=org, tenant=tenant, outbox=outbox, rng=rng, retry=retry)
    return _single_request(job, org=org, tenant=tenant, outbox=outbox, rng=rng)


def tally(*, org: SimulatedOrg, results: Sequence[JobResult], outbox: Outbox) -> OrgTraffic:
    """An organization's figures from its jobs and its drained outbox."""
    calls = [call for result in results for call in result.calls]
    failures = Counter(failure for result in results for failure in result.failures)
    return OrgTraffic(
        org=org.name,
        persona=org.persona.name,
        served=len(calls),
        requests=sum(not call.in_task for call in calls),
        by_model=dict(Counter(call.model for call in calls)),
        events=dict(outbox.delivery.sent),
        failures=dict(failures + outbox.delivery.failed),
        latencies_ms=[call.latency_ms for call in calls],
        tasks=sum(result.task_opened for result in results),
        task_outcomes=list(outbox.delivery.outcomes),
        clear_requests=sum(result.clear for result in results),
        persisted_on_clear=sum(result.clear and result.persisted for result in results),
    )


def _single_request(job: Job, *, org: SimulatedOrg, tenant: Tenant, outbox: Outbox, rng: random.Random) -> JobResult:
    result = JobResult()
    (prompt,) = job.prompts
    served = _call(tenant, prompt=prompt, user=job.user, task_id=None, result=result)
    if served is not None:
        events = feedback_for(org.persona, prompt, served.text, rng)
        for event in events:
            outbox.schedule(Feedback(served.interaction_id, event.type), delay_s=event.delay_s)
        result.clear = not parse_prompt(prompt).ambiguous
        result.persisted = any(event.type == "edit_persisted" for event in events)
    return result


def _background_task(job: Job, *, org: SimulatedOrg, tenant: Tenant, outbox: Outbox, rng: random.Random, retry: Retry) -> JobResult:
    # Opening a task twice after a lost answer leaves an empty task behind: harmless.
    result = JobResult()
    try:
        task_id = post_with_retries(tenant.api, "/api/v1/tasks", {}, retry=retry)["id"]
    except Undelivered as failure:
        result.failures.append(f"task {failure.status}")
        return result
    result.task_opened = True
    steps = []
    for prompt in job.prompts:
        served = _call(tenant, prompt=prompt, user=job.user, task_id=task_id, result=result)
        if served is None:
            return result  # the agent gives up on its task: no outcome to report
        steps.append((prompt, served.text))
    outcome = task_outcome_event(org.persona, steps, rng)
    outbox.schedule(Outcome(task_id, outcome.value), delay_s=outcome.delay_s)
    return result


def _call(tenant: Tenant, *, prompt: str, user: str, task_id: str | None, result: JobResult) -> Served | None:
    """The response, its call recorded in `result`; None when the call failed for good."""
    start = time.perf_counter()
    try:
        served = tenant.chat(prompt=prompt, user=user, task_id=task_id)
    except ChatFailed as failure:
        result.failures.append(f"chat {failure.status}")
        return None
    result.calls.append(Call(served.model, (time.perf_counter() - start) * 1000, in_task=task_id is not None))
    return served


@contextmanager
def _worker_pools(names: Sequence[str], concurrency: int) -> Iterator[dict[str, ThreadPoolExecutor]]:
    """A pool per organization, so that each one has `concurrency` calls in flight. On the way
    out, jobs not started yet are cancelled: an interrupted run stops soon."""
    with ExitStack() as stack:
        pools = {}
        for name in names:
            pools[name] = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=f"traffic-{name}")
            stack.callback(pools[name].shutdown, cancel_futures=True)
        yield pools


def _drain(outboxes: Iterable[Outbox], *, wait: bool) -> None:
    # Waiting on each in turn costs nothing: every outbox's own thread sends meanwhile.
    for outbox in outboxes:
        outbox.drain(wait=wait)
