"""A real worker killed mid-run: the run is taken over by another worker, resumes from its
checkpoint and ends with exactly one adapter version.

It runs on SQLite as on PostgreSQL: the workers open the test database's file (settings/test.py
names one for SQLite), in WAL mode, so each read of this process sees what they committed."""

import json

import pytest
from django.db import connection

from serving import registry
from serving.models import AdapterVersion
from tests.factories import make_tenant, rated, requested
from tests.worker import running_worker
from training import runs
from training.engine.checkpoint import CHECKPOINT_FILE
from training.models import TrainingRun

LEASE_S = 4  # beats every second: few writes beside the test's reads
# Long enough on the tiny model to kill mid-way: 16 examples, 2 per step, 60 epochs = 480 steps.
SLOW_CONFIG = {"epochs": 60, "batch_size": 2, "checkpoint_every": 4}


@pytest.mark.worker
def test_a_worker_killed_mid_run_leaves_exactly_one_adapter_version(transactional_db, tiny_base_model, settings, tmp_path):
    settings.SERVING_ADAPTERS_ROOT, settings.SERVING_BASE_MODEL_NAME = str(tmp_path / "adapters"), "demo-base"
    settings.TRAINING_WORK_DIR, settings.TRAINING_LEASE_S = str(tmp_path / "training"), LEASE_S
    env = {
        "PLATFORM_BASE_MODEL_DIR": str(tiny_base_model), "PLATFORM_BASE_MODEL_NAME": "demo-base",
        "PLATFORM_ADAPTERS_ROOT": settings.SERVING_ADAPTERS_ROOT, "PLATFORM_TRAINING_WORK_DIR": settings.TRAINING_WORK_DIR,
        "PLATFORM_TRAINING_LEASE_S": str(LEASE_S), "PLATFORM_TRAINING_DEVICE": "cpu",
        "PLATFORM_TRAINING_CONFIG": json.dumps(SLOW_CONFIG), "PLATFORM_HOLDOUT_EVERY": "0",
    }
    org = make_tenant("Acme", training_enabled=True).org
    rated(org, *[("edit_persisted",), ("edit_reverted",)] * 8)

    def row() -> TrainingRun:
        return TrainingRun.objects.for_org(org).get()  # autocommit, read whole: sees the worker's commits

    connection.close()  # no snapshot left open by an earlier test (SQLite)

    with running_worker(env=env) as worker:  # assertions inside: a failure prints the worker's output
        run = requested(org)  # committed at once: the task is sent
        checkpoint = runs.run_work_dir(run) / "checkpoint" / CHECKPOINT_FILE
        worker.wait_until(lambda: row().status == TrainingRun.Status.RUNNING, timeout=60, interval=1.0, what="the worker's claim")
        worker.wait_until(checkpoint.exists, timeout=120, interval=0.1, what="the first checkpoint")
        worker.kill()
        worker.process.wait(10)
        assert row().status == TrainingRun.Status.RUNNING and row().attempts == 1
        assert AdapterVersion.objects.for_org(org).count() == 0

    with running_worker(env=env) as worker:
        worker.wait_until(lambda: runs.runs_recover() != [], timeout=30, interval=1.0, what="the dead worker's lease to expire")
        worker.wait_until(lambda: row().status != TrainingRun.Status.RUNNING, timeout=180, interval=1.0, what="the run to end")

    done = row()
    assert done.status == TrainingRun.Status.SUCCEEDED, done.error
    assert done.attempts == 2
    assert done.report["resumed_from_step"] > 0 and done.report["steps"] == 480
    assert AdapterVersion.objects.for_org(org).count() == 1
    assert (registry.adapter_files(done.candidate) / "adapter_model.safetensors").exists()
