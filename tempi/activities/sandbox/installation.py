"""Which tempi installation owns a sandbox container.

A Docker engine can be shared by several tempi installations (users, homes, machines
using one remote engine), each with its own Temporal server. A worker only knows which
sessions are live on *its* server, so it may only sweep containers its own installation
made. The owner is a random id created once under the tempi home and put on every
container as a label; a random id rather than the home's path because two machines can
have the same path and share an engine.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from tempi.activities.sandbox.errors import SandboxError
from tempi.config.paths import tempi_home

INSTALLATION_LABEL = "tempi.installation"
INSTALLATION_FILE = "installation-id"
_ID = re.compile(r"^[0-9a-f]{32}$")


def installation_id(home: Path | None = None) -> str:
    """This installation's id, created the first time it is asked for."""
    path = (home if home is not None else tempi_home()) / INSTALLATION_FILE
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        text = _create(path)
    except (OSError, UnicodeDecodeError) as error:
        raise SandboxError(
            f"Cannot read the installation id in {path}: {error}; fix or remove the file"
        ) from None
    if not _ID.match(text):
        raise SandboxError(f"{path} does not hold an installation id; remove it and a new one is made")
    return text


def _create(path: Path) -> str:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    new = secrets.token_hex(16)
    temp = path.with_name(f".{path.name}.{new}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as file:
        file.write(new + "\n")
    try:
        # A link appears whole or not at all: when two processes start at once, one id
        # wins and both use it.
        os.link(temp, path)
    except FileExistsError:
        return path.read_text(encoding="ascii").strip()
    finally:
        temp.unlink()
    return new
