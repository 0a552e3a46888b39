"""Signals other apps listen to, so that tenants need not know them (ARCHITECTURE.md:
tenants imports nothing of serving or training)."""

from django.dispatch import Signal

# Sent after an organization and its rows are gone, with `org_id` and `slug`: apps remove
# what they keep outside the database (serving: the adapter files).
organization_deleted = Signal()

# Sent inside the transaction that drops recorded content, with `org`, `interaction_ids` (those
# whose content went) and `reason` ("erased", "purged" by retention, "zero_retention"): serving
# taints the adapter versions trained on it (serving/taint.py), or the transaction fails.
content_erased = Signal()
