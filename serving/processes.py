"""Stopping a process group of ours: what `manage.py up` and `scripts/cluster` start each
service as, so that stopping one reaches what it forked. Django-free."""

import os
import signal
import subprocess


def stop_group(process: subprocess.Popen, *, timeout: float) -> None:
    """SIGTERM to the main process (a warm shutdown: Celery finishes its task, gunicorn its
    requests), then, after at most `timeout` seconds, SIGKILL to whatever of its group is left."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    kill_group(process.pid)
    process.wait()


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
