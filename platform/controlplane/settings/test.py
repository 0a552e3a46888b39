"""Settings of the test suite: the embedded default with fast hashing and no waiting.

DATABASE_URL and CELERY_BROKER_URL still come from the environment, so the same suite runs on
SQLite and on PostgreSQL with Redis.
"""

import base64
import os
import tempfile
from pathlib import Path

os.environ.setdefault("PLATFORM_DATA_DIR", tempfile.mkdtemp(prefix="platform-test-"))
os.environ.setdefault(
    "PLATFORM_MASTER_KEYS", "test-1:" + base64.b64encode(b"k" * 32).decode()
)
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is ever downloaded; fail fast instead of timing out
os.environ.setdefault("DJANGO_SECRET_KEY", "test-only-secret-key-" + "x" * 40)

from controlplane.settings.base import *  # noqa: E402,F403
from controlplane.settings.base import DATA_DIR, DATABASES  # noqa: E402

# A file, not :memory:, so that a real worker process started by a test sees the same rows.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["TEST"] = {"NAME": str(Path(DATA_DIR) / "test.sqlite3")}

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
KEY_ROTATION_GRACE_SECONDS = 0
LOGGING = {"version": 1, "disable_existing_loggers": False, "root": {"level": "WARNING"}}
# Runs keep their whole step in the tests, unsampled: tests/training/test_steps.py turns the
# line search on where it is what is tested.
TRAINING_STEP_SEARCH = False
