"""Turning the paths a model writes into absolute paths on the backend."""

from __future__ import annotations

import posixpath


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
