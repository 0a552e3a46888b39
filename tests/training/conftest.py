import pytest


@pytest.fixture(autouse=True)
def nothing_held_out(settings):
    """Training tests count exactly what trains: no interaction is held out for the gates unless a
    test says so."""
    settings.GATES_HOLDOUT_EVERY = 0
