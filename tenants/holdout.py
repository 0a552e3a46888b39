"""The held-out split: one interaction in GATES_HOLDOUT_EVERY, chosen by its id, never trains.

It is the gates' tenant suite, so training (which leaves it out) and serving (which judges
candidates on it) must agree on it: it lives here, below both.
"""

import uuid

from django.conf import settings


def held_out(interaction_id) -> bool:
    """Whether the interaction is held out; GATES_HOLDOUT_EVERY = 0 holds nothing out (and
    leaves the tenant suite without data)."""
    every = settings.GATES_HOLDOUT_EVERY
    return bool(every) and uuid.UUID(str(interaction_id)).int % every == 0
