"""Celery tasks of training: thin wrappers that take ids and call training/runs.py."""

from celery import shared_task

from training import runs


@shared_task(acks_late=True, reject_on_worker_lost=True)
def train_run(run_id: str) -> None:
    """One attempt at a run. Safe to deliver twice: the claim is a compare-and-set, and a run
    held by a live attempt or already ended is left alone."""
    runs.run_execute(run_id)


@shared_task
def training_tick() -> None:
    """Every minute (beat): start the runs that are due, resend the lost ones."""
    runs.runs_start_due()
    runs.runs_recover()
