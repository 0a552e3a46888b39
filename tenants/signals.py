"""Signals other apps listen to, so that tenants need not know them (ARCHITECTURE.md:
tenants imports nothing of serving or training)."""

from django.dispatch import Signal

# Sent after an organization and its rows are gone, with `org_id` and `slug`: apps remove
# what they keep outside the database (serving: the adapter files).
organization_deleted = Signal()
