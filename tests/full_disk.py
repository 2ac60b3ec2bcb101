"""A folder whose file system is full: a tiny tmpfs mounted over it and filled up (needs root,
as CI runs; elsewhere the test is skipped)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def full_disk_at(folder: Path) -> Iterator[Path]:
    """Mount a 64 KB tmpfs at `folder` and fill it; yields the filler, whose removal frees
    the space. Unmounted on the way out."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        if os.environ.get("CI"):
            raise RuntimeError(f"cannot mount a tmpfs: {mounted.stderr}")
        pytest.skip(f"mounting a small tmpfs needs root: {mounted.stderr.strip()}")
    filler = folder / "filler"
    try:
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
        os.close(fd)
        yield filler
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=False, capture_output=True)
