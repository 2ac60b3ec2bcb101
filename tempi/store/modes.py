"""File modes of everything tempi writes about a session.

Session files, their side files and the folders holding them carry whole conversations and
command output, so they are the owner's only, whatever the umask: modes are set explicitly,
not left to `mkdir`'s and `open`'s umask-masked defaults.
"""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700


def make_private_dirs(directory: Path) -> None:
    """Create `directory` and whichever of its parents are missing, each 0700 whatever the
    umask (`Path.mkdir(parents=True)` makes the parents 0777 under umask 000). Folders that
    exist already are left as they are."""
    missing: list[Path] = []
    folder = directory
    while not folder.is_dir() and folder.parent != folder:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, PRIVATE_DIR_MODE)
        except FileExistsError:
            if folder.is_dir():
                continue  # another writer made it meanwhile
            raise
        os.chmod(folder, PRIVATE_DIR_MODE)


def create_private_file(path: Path, flags: int) -> int:
    """`os.open(path, flags | O_CREAT)`; a file it creates is 0600 whatever the umask."""
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    except FileExistsError:
        if flags & os.O_EXCL:
            raise
        return os.open(path, flags | os.O_CREAT, PRIVATE_FILE_MODE)
    os.fchmod(fd, PRIVATE_FILE_MODE)
    return fd
