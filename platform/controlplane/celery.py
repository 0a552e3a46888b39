"""The Celery application: configured from Django settings (CELERY_*), tasks found in the apps."""

import os
from pathlib import Path

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.base")

app = Celery("controlplane")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def ensure_broker_folders() -> None:
    """kombu's filesystem transport expects its folders to exist; it does not create them."""
    from django.conf import settings

    if not settings.CELERY_BROKER_URL.startswith("filesystem"):
        return
    options = settings.CELERY_BROKER_TRANSPORT_OPTIONS
    for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
        if options.get(key):
            Path(options[key]).mkdir(parents=True, exist_ok=True)
