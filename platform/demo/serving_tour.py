"""The main job until the specialization loop exists: simulated organizations served by the
platform, through its public contract only.

Runs `manage.py up` (vLLM with the base model, built first if missing; web server; worker;
scheduler), creates one organization per persona with `create_org`, runs the traffic driver
(their agents call the gateway through the openai client; their users' feedback, late events
included, goes to POST /api/v1/feedback), and prints what each organization got: the
base model's edit-persisted and dissatisfied-follow-up rates on its users, the baseline that
specialization has to beat. Stops the platform at the end.

    python -m demo.serving_tour [--requests 150] [--port 8000]
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from demo.http import Api
from demo.personas import Persona
from demo.traffic import SimulatedOrg, format_summary, run_traffic

ROOT = Path(__file__).resolve().parents[2]
PERSONAS = ("typed_snake", "camel_two_space", "tab_terse")
READY_TIMEOUT_S = 1800  # the first run builds the base model (about 10 minutes on 2 cores)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=150, help="gateway calls per organization")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    with running_platform(args.port) as url:
        orgs = [SimulatedOrg(name, Persona.load(name), create_org(name)) for name in PERSONAS]
        print(f"\n== {len(orgs)} organizations, {args.requests} calls each, feedback hours compressed into seconds")
        traffic = run_traffic(url=url, orgs=orgs, requests=args.requests, concurrency=4, seed=0, time_scale=2e-4, task_share=0.1)
        for org in orgs:
            print()
            print(format_summary(traffic[org.name]))
            print(f"  adapter versions: {Api(url, org.api_key).get('/api/v1/adapters') or 'none yet (served by the base model)'}")
    print("\nThe base model's rates above are the baseline; training and gates (next) specialize each organization's adapter.")


def create_org(persona: str) -> str:
    """A new organization, opted in to training, through `manage.py create_org`; its API key."""
    output = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "create_org", "--name", f"{persona} {uuid.uuid4().hex[:4]}",
         "--owner-email", f"owner@{persona.replace('_', '-')}.example", "--training-enabled"],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(output)["api_key"]


@contextmanager
def running_platform(port: int) -> Iterator[str]:
    """`manage.py up` in the background until its ready line; Ctrl-C'd (SIGINT) on the way out."""
    up = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "up", "--port", str(port)], cwd=ROOT,
                          env={**os.environ, "LOG_LEVEL": "WARNING"}, stdout=subprocess.PIPE, text=True)
    try:
        yield _ready_url(up)
    finally:
        up.send_signal(signal.SIGINT)
        try:
            up.wait(timeout=60)
        except subprocess.TimeoutExpired:
            up.kill()


def _ready_url(up: subprocess.Popen) -> str:
    deadline = time.monotonic() + READY_TIMEOUT_S
    for line in up.stdout:
        print(f"  [up] {line.rstrip()}", flush=True)
        if line.startswith("ready: "):
            return line.removeprefix("ready: ").strip()
        if time.monotonic() > deadline:
            break
    raise SystemExit(f"`manage.py up` did not get ready (exit code {up.poll()}); see .data/logs/.")


if __name__ == "__main__":
    main()
