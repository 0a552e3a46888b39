"""The recording path on its own, end to end (the main job, demo.loop, runs the whole loop).

Starts the web server on the embedded default, creates two organizations with `create_org`,
sends interactions (with secrets and PII in them), feedback batches (including a replay and a
bad batch) and a background task's outcome through the public API, and prints what the
platform stored and what it refused. Stops the server at the end.

    python -m demo.recording_tour [--port 8765]
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

from demo.http import Api, ApiError

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "Task: Return the sum of the numbers in a list.\nFunction: sum list\nFile: utils.py"
EDIT = '<edit file="utils.py">\ndef sum_list(xs: list[int]) -> int:\n    return sum(xs)\n</edit>'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="default: a free port")
    args = parser.parse_args()
    port = args.port or _free_port()
    manage("migrate", "--verbosity", "0")
    with web_server(port):
        base = f"http://127.0.0.1:{port}"
        acme = Api(base, create_org("Acme Tour", "owner@acme.example")["api_key"])
        globex = Api(base, create_org("Globex Tour", "owner@globex.example")["api_key"])
        tour(acme, globex)


def tour(acme: Api, globex: Api) -> None:
    globex.put("/api/v1/privacy-policy", {"store_content": False})
    section("Privacy policies")
    for name, api in (("acme", acme), ("globex", globex)):
        print(f"  {name}: {api.get('/api/v1/privacy-policy')}")

    section("Recording interactions")
    leaky = PROMPT + "\n# deploy key: AKIAIOSFODNN7EXAMPLE, ask ops@acme.example or +1 415 555 0100"
    task = acme.post("/api/v1/tasks", {})["id"]
    acme_ids = [acme.post("/api/v1/interactions", {"messages": [{"role": "user", "content": text}], "completion": EDIT,
                                                    "latency_ms": 40.0, "task_id": task})["id"]
                for text in (PROMPT, leaky)]
    globex_id = globex.post("/api/v1/interactions", {"messages": [{"role": "user", "content": PROMPT}], "completion": EDIT})["id"]
    stored = acme.get(f"/api/v1/interactions/{acme_ids[1]}")
    print(f"  acme recorded {len(acme_ids)}; as stored after redaction ({stored['redactions']} findings):")
    print("    " + stored["messages"][0]["content"].replace("\n", "\n    "))
    zero = globex.get(f"/api/v1/interactions/{globex_id}")
    print(f"  globex (zero-retention) keeps metrics only: messages={zero['messages']}, completion={zero['completion']}")

    section("Feedback")
    batch = {"events": [{"interaction_id": i, "type": t, "idempotency_key": f"{i}:{t}"}
                        for i in acme_ids for t in ("edit_accepted", "edit_persisted")]}
    first, replay = acme.post("/api/v1/feedback", batch), acme.post("/api/v1/feedback", batch)
    print(f"  batch of {len(batch['events'])}: created {first['created']}; replayed: created {replay['created']}, duplicates {replay['duplicates']}")
    bad = {"events": [batch["events"][0], {"interaction_id": acme_ids[0], "type": "thumbs_up", "idempotency_key": "x"}]}
    refused(acme, "/api/v1/feedback", bad, "a batch with an unknown event type")
    refused(acme, "/api/v1/feedback", {"events": [{"interaction_id": globex_id, "type": "edit_accepted", "idempotency_key": "y"}]},
            "feedback naming another organization's interaction")
    outcome = acme.post(f"/api/v1/tasks/{task}/outcome", {"value": 1.0, "idempotency_key": f"outcome:{task}"})
    print(f"  background task {task[:8]}…: outcome {outcome['value']}, {acme.get(f'/api/v1/tasks/{task}')['interactions']} interactions")

    section("Isolation")
    print(f"  globex reading acme's interaction: HTTP {globex.status_of('GET', f'/api/v1/interactions/{acme_ids[0]}')}")
    print(f"  acme's feedback as acme sees it: {len(acme.get('/api/v1/feedback')['results'])} events; "
          f"globex sees {len(globex.get('/api/v1/feedback')['results'])}")
    section("Audit log of acme")
    for event in acme.get("/api/v1/audit-log")["results"][::-1]:
        print(f"  {event['at'][:19]} {event['actor']:<22} {event['action']:<24} {event['target']}")
    print("\nThe specialization loop (serving, training, gates) is not built yet; this tour shows the recording path.")


def refused(api: Api, path: str, body: dict, what: str) -> None:
    try:
        api.post(path, body)
        raise SystemExit(f"The platform accepted {what}; it must refuse it.")
    except ApiError as error:
        print(f"  refused {what}: HTTP {error.status} {error.body['error']['message']}")


def section(title: str) -> None:
    print(f"\n== {title}")


def manage(*args: str) -> str:
    return subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], check=True, capture_output=True, text=True).stdout


def create_org(name: str, email: str) -> dict:
    return json.loads(manage("create_org", "--name", f"{name} {uuid.uuid4().hex[:4]}", "--owner-email", email))


@contextmanager
def web_server(port: int):
    env = {**os.environ, "LOG_LEVEL": "ERROR", "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "platform")])}
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "controlplane.asgi:application", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT, env=env,
    )
    try:
        _wait_for_port(port, server)
        yield
    finally:
        server.terminate()
        server.wait(timeout=10)


def _wait_for_port(port: int, server: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"The web server exited with code {server.returncode}.")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise SystemExit(f"The web server did not listen on port {port} within {timeout:.0f} s.")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


if __name__ == "__main__":
    main()
