"""What a web process loads: each gunicorn worker imports the ASGI application when it starts,
and again whenever it is replaced after a crash."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_web_process_starts_without_the_training_engine(tmp_path):
    """torch, peft and transformers made each worker take 6 s to start on an idle machine and
    17 s on a busy one; the web processes never train."""
    code = "import sys, controlplane.asgi; print([m for m in ('torch', 'peft', 'transformers') if m in sys.modules])"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'platform'}", "DJANGO_SETTINGS_MODULE": "controlplane.settings.test",
           "PLATFORM_DATA_DIR": str(tmp_path)}
    loaded = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    assert loaded.stdout.splitlines()[-1] == "[]"
