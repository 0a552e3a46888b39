"""Fixtures of the training tests: in-process training on the tiny base model, runs and cycle
steps remembered instead of sent to the broker, and a second organization that trains too."""

import pytest

from tenants import transactions
from tests.factories import Tenant, make_tenant


@pytest.fixture(autouse=True)
def nothing_held_out(settings):
    """Training tests count exactly what trains: no interaction is held out for the gates unless a
    test says so."""
    settings.GATES_HOLDOUT_EVERY = 0


@pytest.fixture
def training(adapters_root, settings, tmp_path, tiny_base_model):
    """Training runs in this process, on the CPU, one short epoch on the tiny base model."""
    settings.SERVING_BASE_MODEL_DIR = str(tiny_base_model)
    settings.TRAINING_WORK_DIR = str(tmp_path / "training")
    settings.TRAINING_DEVICE = "cpu"
    settings.TRAINING_CONFIG = {"epochs": 1, "batch_size": 4}
    return settings


@pytest.fixture
def sent(monkeypatch) -> list[str]:
    """The ids of the runs and cycles whose task was sent to the broker (here: remembered, not
    sent; a test runs them when it wants)."""
    sent = []
    monkeypatch.setattr(transactions, "send", lambda task, object_id, *more_args: sent.append(str(object_id)))
    return sent


@pytest.fixture
def trainable_globex(db) -> Tenant:
    """globex with training on, where a test shows that one organization's runs and cycles
    neither hold up another's nor read its data."""
    return make_tenant("Globex", training_enabled=True)
