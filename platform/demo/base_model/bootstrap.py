"""Find the base model for a config in the cache, or build it there.

The cache is `<data dir>/base-models/<fingerprint>/`. A build writes into a temporary folder
and renames it into place, so a crash mid-build never leaves a half model that looks whole,
and two processes building at once both end with the same complete directory.
"""

import json
import os
import shutil
from pathlib import Path

from demo.base_model.config import BaseModelConfig


def cached_model_dir(config: BaseModelConfig, data_dir: Path) -> Path:
    return data_dir / "base-models" / config.fingerprint()


def ensure_base_model(config: BaseModelConfig, data_dir: Path, *, progress: bool = True) -> Path:
    target = cached_model_dir(config, data_dir)
    if (target / "build.json").exists():
        return target
    from demo.base_model.train import build_base_model  # torch is slow to import: only when building

    staging = target.with_name(f"{target.name}.building-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    build_base_model(config, staging, progress=progress)
    try:
        staging.rename(target)
    except OSError:  # another process finished first: its model is the same
        shutil.rmtree(staging, ignore_errors=True)
    return target


def build_info(model_dir: Path) -> dict:
    return json.loads((model_dir / "build.json").read_text())
