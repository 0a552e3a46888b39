"""Secrets for the embedded default, made once and kept in the data directory.

A newcomer's first run needs no configuration, yet the secret key and master key must not be
constants in the repository. Production settings never use this: they require both from the
environment.
"""

import base64
import json
import os
import secrets
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
    # O_EXCL: two processes starting at once must agree on one set of secrets.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return json.loads(path.read_text())
    with os.fdopen(fd, "w") as file:
        json.dump(made, file)
    return made
