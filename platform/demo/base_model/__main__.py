"""python -m demo.base_model [--data-dir DIR] [--seed N] [--steps N] [--tiny] [--architecture qwen2]: build or
find the base model (a Qwen2 is the second architecture: PLATFORM_BASE_MODEL_DIR=<its model_dir> serves it)."""

import argparse
import json
import os
from dataclasses import replace
from pathlib import Path

from demo.base_model.bootstrap import build_info, ensure_base_model
from demo.base_model.config import ARCHITECTURES, QWEN2, TINY, TINY_QWEN2, BaseModelConfig

ROOT = Path(__file__).resolve().parents[3]


def main() -> None:
    parser = argparse.ArgumentParser(description="Build the demo base model, or find it in the cache.")
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("PLATFORM_DATA_DIR", ROOT / ".data")))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, help="training steps (default: the config's)")
    parser.add_argument("--tiny", action="store_true", help="the seconds-fast test model, not a good one")
    parser.add_argument("--architecture", choices=ARCHITECTURES, default="llama",
                        help="llama: the demo's model; qwen2: a second architecture, a few million parameters")
    args = parser.parse_args()
    configs = {("llama", False): BaseModelConfig(), ("llama", True): TINY, ("qwen2", False): QWEN2, ("qwen2", True): TINY_QWEN2}
    config = replace(configs[args.architecture, args.tiny], seed=args.seed)
    if args.steps:
        config = replace(config, steps=args.steps)
    model_dir = ensure_base_model(config, args.data_dir)
    print(json.dumps({"model_dir": str(model_dir), **build_info(model_dir)["report"]}))


if __name__ == "__main__":
    main()
