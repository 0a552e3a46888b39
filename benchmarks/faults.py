"""Faults against `scripts/cluster`: with steady traffic running, kill (SIGKILL) in turn a vLLM
replica, a gateway worker, the training worker mid-run, Redis and PostgreSQL, each brought back
by the cluster; then count, from the clients' own log and the database, what was lost or doubled.

    PYTHONPATH=.:platform .venv/bin/python benchmarks/faults.py [--clients 3] [--steady-s 12] [--base-model DIR] [--only SERVICE...] [--json]

The traffic: `--clients` threads, each sending a chat completion (no retries: every failure is
counted) and then one feedback event about each answer, in a batch with the answer's idempotency
key, sent again with the same key until stored (as a tenant's outbox would). Per fault: the
requests that failed, how long traffic was disturbed (from the kill to the last failure it
caused), and the slowest failure (a fault must fail requests fast, not hang them). At the end:
responses received vs interactions stored (every 200 has its interaction, exactly once),
interactions stored whose client got no answer, feedback events acknowledged vs stored, and the
training runs and adapter versions (one version per run, the run killed mid-way resumed).
Bounded: each fault waits at most `--recover-s` for the service to come back; loopback only.
The cluster runs with a short training lease and tick so that the killed run resumes within the
benchmark (PLATFORM_TRAINING_LEASE_S, PLATFORM_TRAINING_TICK_S).
"""

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

from deploy.running import RunningCluster, accepts, alive, children, running_cluster, wait_until  # noqa: E402

PROMPTS = ["Read the file app.py", "Rename the variable count to total in utils.py", "Add a docstring to the parse function",
           "Fix the failing test in test_api.py", "Write a function that reverses a list"]
CHAT_TIMEOUT_S = 30.0
FEEDBACK_DEADLINE_S = 180.0  # a client keeps sending an event again for this long


@dataclass
class ClientLog:
    """What the clients saw, in the order they saw it (appends are atomic under the GIL)."""

    requests: list[tuple[float, float, int, str | None]] = field(default_factory=list)  # (sent, took_s, status, interaction id)
    acknowledged: list[str] = field(default_factory=list)  # idempotency keys the platform said it stored
    given_up: list[str] = field(default_factory=list)  # keys never acknowledged before the deadline
    feedback_attempts: Counter = field(default_factory=Counter)  # by HTTP status (0: no answer)


class Traffic:
    def __init__(self, url: str, key: str, clients: int):
        self.url, self.headers = url, {"Authorization": f"Bearer {key}"}
        self.log = ClientLog()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._client, args=(n,), daemon=True) for n in range(clients)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=FEEDBACK_DEADLINE_S + CHAT_TIMEOUT_S)

    def _client(self, number: int) -> None:
        with httpx.Client(timeout=CHAT_TIMEOUT_S, headers=self.headers) as http:
            n = 0
            while not self.stopping.is_set():
                n += 1
                body = {"model": "default", "max_tokens": 24, "user": f"user-{number}",
                        "messages": [{"role": "user", "content": PROMPTS[(number + n) % len(PROMPTS)]}]}
                sent = time.monotonic()
                try:
                    response = http.post(f"{self.url}/v1/chat/completions", json=body)
                    status, interaction = response.status_code, response.json().get("id") if response.status_code == 200 else None
                except (httpx.HTTPError, ValueError):
                    status, interaction = 0, None
                self.log.requests.append((sent, time.monotonic() - sent, status, interaction))
                if interaction:
                    self._feedback(http, interaction)
                else:
                    time.sleep(0.2)  # as a client backs off after a failure

    def _feedback(self, http: httpx.Client, interaction: str) -> None:
        key = f"{interaction}:edit_persisted"
        event = {"interaction_id": interaction, "type": "edit_persisted", "idempotency_key": key}
        deadline = time.monotonic() + FEEDBACK_DEADLINE_S
        while time.monotonic() < deadline:
            try:
                status = http.post(f"{self.url}/api/v1/feedback", json={"events": [event]}).status_code
            except httpx.HTTPError:
                status = 0
            self.log.feedback_attempts[status] += 1
            if status in (200, 201):
                self.log.acknowledged.append(key)
                return
            time.sleep(0.5)
        self.log.given_up.append(key)


@dataclass
class Fault:
    name: str
    service: str
    killed_at: float = 0.0
    back_after_s: float | None = None


def kill(cluster: RunningCluster, fault: Fault, *, recover_s: float) -> None:
    """SIGKILL the service's process group (for a gateway worker: the worker alone), then wait
    until the cluster, or gunicorn, has it running again."""
    if fault.service.startswith("web-worker"):
        pid = cluster.service(fault.service)["pid"]
        fault.killed_at = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        fault.back_after_s = wait_until(lambda: not alive(pid) and len(children(cluster.service("web")["pid"])) >= 2,
                                        timeout=recover_s, what="a new gateway worker")
        return
    service = cluster.service(fault.service)
    fault.killed_at = time.monotonic()
    os.killpg(service["pid"], signal.SIGKILL)
    fault.back_after_s = wait_until(lambda: cluster.service(fault.service)["pid"] != service["pid"] and _serving(service),
                                    timeout=recover_s, what=f"{fault.service} serving again")


def _serving(service: dict) -> bool:
    """The service answers again: vLLM's health check, a connection for PostgreSQL and Redis."""
    url = service.get("url")
    if url is None:
        return True
    if service["kind"] == "vllm":
        try:
            return httpx.get(f"{url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False
    return accepts(url)


def api(cluster: RunningCluster, key: str, method: str, path: str, **kwargs) -> httpx.Response:
    return httpx.request(method, f"{cluster.url}/api/v1/{path}", headers={"Authorization": f"Bearer {key}"}, timeout=30, **kwargs)


def train_and_kill_the_worker_mid_run(cluster: RunningCluster, key: str, fault: Fault, *, recover_s: float) -> str:
    started = api(cluster, key, "POST", "training-runs", json={})
    if started.status_code == 409 and "active_run" in started.text:  # the schedule started one already
        run_id = started.json()["error"]["details"]["active_run"]
    elif started.status_code in (200, 201, 202):
        run_id = started.json()["id"]
    else:
        raise RuntimeError(f"could not start a training run: {started.status_code} {started.text}")
    wait_until(lambda: api(cluster, key, "GET", f"training-runs/{run_id}").json()["status"] == "running", timeout=recover_s,
               what="the training run running")
    time.sleep(3)  # mid-run: some steps done
    kill(cluster, fault, recover_s=recover_s)
    return run_id


STORED = """
import json
from serving.models import AdapterVersion
from tenants.models import FeedbackEvent, Interaction, Organization
from training.models import TrainingRun
org = Organization.objects.get(slug={slug!r})
print(json.dumps({{
    "interactions": [str(i) for i in Interaction.objects.for_org(org).values_list("id", flat=True)],
    "feedback": list(FeedbackEvent.objects.for_org(org).values_list("idempotency_key", flat=True)),
    "runs": [[str(r.id), r.status, str(r.candidate_id) if r.candidate_id else None, r.attempts, r.error[-400:]]
             for r in TrainingRun.objects.for_org(org)],
    "versions": list(AdapterVersion.objects.for_org(org).values_list("name", flat=True)),
}}))
"""


def measure(args: argparse.Namespace) -> dict:
    env = {"PLATFORM_TRAINING_LEASE_S": "10", "PLATFORM_TRAINING_TICK_S": "5", "PLATFORM_TRAINING_STEP_SEARCH": "false"}
    base = ["--base-model", str(args.base_model)] if args.base_model else []
    with tempfile.TemporaryDirectory(prefix="faults-") as data_dir, \
            running_cluster("--web", "2", "--replicas", "2", "--port", str(args.port), *base, data_dir=Path(data_dir), env=env) as cluster:
        org = json.loads(cluster.manage("create_org", "--name", f"Faults {uuid.uuid4().hex[:4]}", "--owner-email", "ops@faults.example",
                                        "--training-enabled"))
        traffic = Traffic(cluster.url, org["api_key"], args.clients)
        traffic.start()
        time.sleep(args.steady_s)
        faults = [Fault("vLLM replica", "vllm-1"), Fault("gateway worker", "web-worker-1"),
                  Fault("training worker mid-run", "training-worker"), Fault("Redis", "redis"), Fault("PostgreSQL", "postgres")]
        faults = [fault for fault in faults if not args.only or fault.service in args.only]
        run_id = None
        for fault in faults:
            if fault.service == "training-worker":
                run_id = train_and_kill_the_worker_mid_run(cluster, org["api_key"], fault, recover_s=args.recover_s)
            else:
                kill(cluster, fault, recover_s=args.recover_s)
            print(f"killed {fault.name}; back after {fault.back_after_s:.1f} s", file=sys.stderr, flush=True)
            time.sleep(args.steady_s)
        ended_at = time.monotonic()
        traffic.stop()
        if run_id:
            wait_until(lambda: api(cluster, org["api_key"], "GET", f"training-runs/{run_id}").json()["status"] in ("succeeded", "failed"),
                       timeout=args.recover_s * 3, what="the killed training run finishing")
        stored = json.loads(cluster.manage("shell", "-c", STORED.format(slug=org["org"])).strip().splitlines()[-1])
    return tally(traffic.log, faults, stored, ended_at=ended_at, run_id=run_id)


def tally(log: ClientLog, faults: list[Fault], stored: dict, *, ended_at: float, run_id: str | None) -> dict:
    answered = [interaction for _, _, status, interaction in log.requests if status == 200]
    stored_ids = Counter(stored["interactions"])
    stored_keys = Counter(stored["feedback"])
    per_fault = []
    for fault, after in zip(faults, [*(f.killed_at for f in faults[1:]), ended_at]):
        # A failure belongs to the fault in whose window it ended (a request sent just before a kill fails because of it).
        failed = [(sent, took, status) for sent, took, status, _ in log.requests if status != 200 and fault.killed_at <= sent + took < after]
        per_fault.append({
            "fault": fault.name, "back_after_s": round(fault.back_after_s or 0, 1), "failed_requests": len(failed),
            "statuses": dict(Counter(str(status) for _, _, status in failed)),
            "disturbed_s": round(max((sent + took for sent, took, _ in failed), default=fault.killed_at) - fault.killed_at, 1),
            "slowest_failure_s": round(max((took for _, took, _ in failed), default=0.0), 2),
        })
    runs = {run[0]: run for run in stored["runs"]}
    return {
        "requests": len(log.requests), "answered": len(answered),
        "answered_without_record": sum(1 for interaction in answered if interaction not in stored_ids),
        "duplicate_records": sum(count - 1 for count in stored_ids.values() if count > 1),
        "recorded_without_answer": len(set(stored_ids) - set(answered)),
        "feedback_acknowledged": len(log.acknowledged), "feedback_stored": len(stored_keys),
        "feedback_lost": sum(1 for key in log.acknowledged if key not in stored_keys),
        "feedback_duplicates": sum(count - 1 for count in stored_keys.values() if count > 1),
        "feedback_given_up": len(log.given_up), "feedback_attempts": dict(log.feedback_attempts),
        "killed_run": runs.get(run_id), "runs": len(runs),
        "runs_succeeded": sum(1 for run in runs.values() if run[1] == "succeeded"), "adapter_versions": len(stored["versions"]),
        "faults": per_fault,
    }


def report(result: dict) -> str:
    lines = ["| fault | back after s | failed requests (statuses; 0: no answer) | disturbed s | slowest failure s |",
             "|---|---|---|---|---|"]
    lines += [f"| {f['fault']} | {f['back_after_s']} | {f['failed_requests']} {f['statuses']} | {f['disturbed_s']} | {f['slowest_failure_s']} |"
              for f in result["faults"]]
    lines += ["", f"responses {result['answered']} of {result['requests']} requests; answered without a record "
                  f"{result['answered_without_record']}; duplicate records {result['duplicate_records']}; "
                  f"recorded without an answer {result['recorded_without_answer']}",
              f"feedback acknowledged {result['feedback_acknowledged']}, stored {result['feedback_stored']}, lost "
              f"{result['feedback_lost']}, duplicates {result['feedback_duplicates']}, given up {result['feedback_given_up']}",
              f"training runs {result['runs']} ({result['runs_succeeded']} succeeded), adapter versions {result['adapter_versions']}; "
              f"the killed run: {result['killed_run']}"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--steady-s", type=float, default=12.0, help="traffic before the first fault and after each")
    parser.add_argument("--recover-s", type=float, default=300.0, help="the longest a service may take to come back")
    parser.add_argument("--port", type=int, default=8190)
    parser.add_argument("--base-model", type=Path, help="default: the embedded demo model")
    parser.add_argument("--only", nargs="+", metavar="SERVICE", help="kill only these (vllm-1 web-worker-1 training-worker redis postgres)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    result = measure(args)
    print(json.dumps(result, indent=2) if args.json else report(result))


if __name__ == "__main__":
    main()
