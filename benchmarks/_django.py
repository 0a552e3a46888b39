"""Set up Django for a benchmark on a throwaway database (SQLite in a temp dir, or DATABASE_URL)."""

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup() -> None:
    sys.path[:0] = [str(ROOT), str(ROOT / "platform")]
    os.environ.setdefault("PLATFORM_DATA_DIR", tempfile.mkdtemp(prefix="platform-bench-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.base")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
