"""Signals training listens to, so that serving need not know it (ARCHITECTURE.md: serving
imports nothing of training)."""

from django.dispatch import Signal

# Sent inside the transaction that tainted them, with `org` and `adapters` (serving/taint.py):
# training starts the retrain the organization's privacy policy asks for.
adapters_tainted = Signal()

# Sent inside the transaction that registers an uploaded adapter, with `adapter`
# (serving/uploads.py): training starts the cycle that gates it; a receiver that refuses
# (Conflict: another cycle is active) refuses the upload.
candidate_uploaded = Signal()
