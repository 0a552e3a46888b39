#!/usr/bin/env python
"""Django's command-line utility for the control plane."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent


def main() -> None:
    # `platform/` is a folder, not a package: it only holds controlplane and demo.
    sys.path.insert(0, str(ROOT / "platform"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.base")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
