"""Turning the paths a model writes into absolute paths on the backend."""

from __future__ import annotations

import os
import posixpath

from tempi.activities.tools.backend import ExecutionBackend
from tempi.activities.tools.names import has_byte_escapes, unescape_name


def resolve_path(path: str, cwd: str, home: str) -> str:
    """Absolute, lexically normalised path: `~` expands to `home`, relative paths join `cwd`.

    Models sometimes prefix paths with `@` (the way users mention files); it is dropped.
    """
    path = path.strip()
    if path.startswith("@"):
        path = path[1:]
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    if not posixpath.isabs(path):
        path = posixpath.join(cwd, path)
    return posixpath.normpath(path)


def relative_to(path: str, root: str) -> str:
    """`path` relative to `root` with forward slashes; `path` itself when outside `root`."""
    relative = posixpath.relpath(path, root)
    return path if relative.startswith("..") else relative


async def resolve_tool_path(path: str, cwd: str, backend: ExecutionBackend) -> str:
    """`resolve_path`, plus the `\\xHH` form of names that are not valid UTF-8 (see
    `names`): such a path names the file with those bytes unless the literal name exists."""
    resolved = resolve_path(path, cwd, backend.home)
    if not has_byte_escapes(resolved) or await backend.stat(resolved) is not None:
        return resolved
    # Through bytes and back, so bytes that happen to form valid UTF-8 read as text again.
    return os.fsdecode(os.fsencode(unescape_name(resolved)))
