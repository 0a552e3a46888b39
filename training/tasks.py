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


STEP_RETRIES = 5  # a step that needs a model server is tried 6 times over about 15 minutes
STEP_RETRY_S = 30  # before the first retry; doubled before each next one


@shared_task(acks_late=True, bind=True)
def cycle_advance(self, cycle_id: str, turn: int | None = None) -> None:
    """One step of a cycle (for the gates, the turn it was sent for); a step already taken is
    not taken again. A step whose model server did not answer is retried with backoff, then the
    cycle fails with the reason."""
    try:
        cycles.cycle_advance(cycle_id, turn)
    except cycles.StepUnavailable as error:
        if self.request.retries >= STEP_RETRIES:
            cycles.cycle_give_up(cycle_id, f"{error} (tried {STEP_RETRIES + 1} times)")
            return
        raise self.retry(countdown=STEP_RETRY_S * 2 ** self.request.retries, max_retries=STEP_RETRIES) from error


@shared_task
def training_tick() -> None:
    """Every minute (beat): start the cycles that are due, resend lost runs, move waiting cycles on."""
    cycles.cycles_start_due()
    runs.runs_recover()
    cycles.cycles_nudge()
