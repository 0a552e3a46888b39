"""Large recordings are redacted in a low-priority process of their own, the same as in place."""

import os
import signal
import time

from tenants.models import Interaction
from tenants.recording import interaction_content
from tenants.redaction import aside
from tests.factories import record

SECRET = 'db_password = "hunter2-Zq9x"'
LARGE = "\n".join(["def f(x):\n    return x + 1"] * 400 + [SECRET, "call +1 415 555 0134"])


def test_a_large_recording_is_redacted_aside_at_low_priority_like_in_place(acme, settings):
    settings.REDACTION_ASIDE_OVER = 1_000
    pid = aside.worker_pid()
    assert pid != os.getpid()
    assert os.getpriority(os.PRIO_PROCESS, pid) >= min(19, os.getpriority(os.PRIO_PROCESS, 0) + aside.NICENESS)  # 19: the lowest

    stored = interaction_content(interaction=Interaction.objects.for_org(acme.org).get(pk=record(acme.client, text=LARGE)))
    text = stored["messages"][0]["content"]
    assert "hunter2" not in text and "555 0134" not in text and "[REDACTED:password]" in text
    messages = [{"role": "user", "content": LARGE}]
    assert aside.redact_interaction(messages, "ok", aside_over=1_000) == aside.redact_interaction(messages, "ok", aside_over=0)


def test_the_aside_process_outlives_the_thread_that_started_it():
    """A request's thread starts it and is gone once the request is answered; the next large
    recording must find it, not redact in the web server's own process."""
    import threading

    aside._discard()
    started: list[int] = []
    thread = threading.Thread(target=lambda: started.append(aside.worker_pid()))
    thread.start()
    thread.join()
    time.sleep(1.5)  # what a watcher of the thread would take to notice
    assert aside.worker_pid() == started[0]


def test_a_small_recording_is_redacted_in_place(monkeypatch):
    monkeypatch.setattr(aside, "_executor", lambda: (_ for _ in ()).throw(AssertionError("sent aside")))
    assert aside.redact_interaction([{"role": "user", "content": SECRET}], "ok", aside_over=1_000)[2] == 1


def test_when_the_aside_process_dies_the_text_is_redacted_in_place_and_a_new_one_starts(acme, settings):
    settings.REDACTION_ASIDE_OVER = 1_000
    os.kill(aside.worker_pid(), signal.SIGKILL)
    stored = interaction_content(interaction=Interaction.objects.for_org(acme.org).get(pk=record(acme.client, text=LARGE)))
    assert "hunter2" not in stored["messages"][0]["content"]
    assert aside.worker_pid() != os.getpid()


def test_the_gateways_recordings_are_redacted_in_place(acme, settings, monkeypatch):
    """Bounded by the organization's token rate, and waiting on them would hold a completion."""
    from tenants.recording import InteractionContent, interaction_record

    settings.REDACTION_ASIDE_OVER = 1_000
    monkeypatch.setattr(aside, "_executor", lambda: (_ for _ in ()).throw(AssertionError("sent aside")))
    interaction = interaction_record(org=acme.org, content=InteractionContent(messages=[{"role": "user", "content": LARGE}], completion="ok"),
                                     source=Interaction.Source.GATEWAY)
    assert "hunter2" not in interaction_content(interaction=interaction)["messages"][0]["content"]


def test_the_aside_process_dies_with_the_web_server(tmp_path):
    """A pool's worker would outlive a parent killed without its exit handlers, holding its pipes."""
    import subprocess
    import sys
    import time

    script = ("import os, sys; sys.path[:0] = sys.argv[1:]; from tenants.redaction import aside; "
              "print(aside.worker_pid(), flush=True); os.kill(os.getpid(), 9)")
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run([sys.executable, "-c", script, root], capture_output=True, text=True, timeout=60)
    worker = int(done.stdout.split()[0])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(worker, signal.SIGKILL)
    raise AssertionError("the aside process outlived its parent")
