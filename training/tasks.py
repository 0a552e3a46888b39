"""Celery tasks of training: thin wrappers that take ids and call training/runs.py and cycles.py."""

from celery import shared_task

from training import cycles, runs


@shared_task(acks_late=True, reject_on_worker_lost=True)
def train_run(run_id: str) -> None:
    """One attempt at a run. Safe to deliver twice: the claim is a compare-and-set, and a run
    held by a live attempt or already ended is left alone."""
    run = runs.run_execute(run_id)
    if run is not None and run.status not in run.ACTIVE:
        cycles.run_ended(run)


@shared_task(acks_late=True)
def cycle_advance(cycle_id: str) -> None:
    """One step of a cycle; a step already taken is not taken again."""
    cycles.cycle_advance(cycle_id)


@shared_task
def training_tick() -> None:
    """Every minute (beat): start the cycles that are due, resend lost runs, move waiting cycles on."""
    cycles.cycles_start_due()
    runs.runs_recover()
    cycles.cycles_nudge()
