"""Secrets for the embedded default, made once and kept in the data directory.

A newcomer's first run needs no configuration, yet the secret key and master key must not be
constants in the repository. Production settings never use this: they require both from the
environment.
"""

import base64
import json
import os
import secrets
import tempfile
from pathlib import Path


def load_or_create(data_dir: Path) -> dict[str, str]:
    path = data_dir / "secrets.json"
    if path.exists():
        return json.loads(path.read_text())
    data_dir.mkdir(parents=True, exist_ok=True)
    made = {
        "secret_key": secrets.token_urlsafe(50),
        "master_keys": "embedded-1:" + base64.b64encode(secrets.token_bytes(32)).decode(),
    }
    # Written whole to a private file, then linked into place: link() fails if the name
    # exists, so two processes starting at once agree on one set of secrets, and neither can
    # read the other's half-written file.
    fd, staging = tempfile.mkstemp(dir=data_dir, prefix=".secrets-")
    try:
        with os.fdopen(fd, "w") as file:
            json.dump(made, file)
        os.link(staging, path)
    except FileExistsError:
        return json.loads(path.read_text())
    finally:
        os.unlink(staging)
    return made
