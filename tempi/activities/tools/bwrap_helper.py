"""The file operations of the bwrap backend, run inside the sandbox.

This file is not imported by tempi: its source is handed to the sandboxed interpreter
(`python -I -S -c SOURCE OP WORKSPACE PATH`), so it uses the standard library only. Acting
inside the sandbox is what makes the file tools safe: whatever symlinks a concurrent
command swaps in, the only host files this process can reach for writing are those under
the workspace, and files outside it that the sandbox does not show cannot be read.

Protocol: success exits 0 (`stat` prints `none` or `KIND SIZE`; `read` prints `+` then
the bytes; `list` prints `KIND\\tNAME\\0` records; `write` reads the content from stdin).
Failure exits 1 with `{"errno": N, "strerror": "...", "outside": bool}` on stderr.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import stat
import sys


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return "other"


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _write(root: str, path: str, data: bytes) -> None:
    target = os.path.realpath(path)  # write through symlinks, do not replace them
    if not _inside(target, root):
        raise PermissionError(errno.EACCES, "outside the workspace", path)
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    try:
        info = os.stat(target)
    except FileNotFoundError:
        mode = None
    else:
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
        mode = stat.S_IMODE(info.st_mode)
    temp = os.path.join(parent, f".{os.path.basename(target)}.tempi-{secrets.token_hex(4)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    try:
        fd = os.open(temp, flags, 0o666)
    except PermissionError:
        # A writable file in a read-only directory: no room for a temp file, write in place.
        fd = os.open(target, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def main() -> None:
    op, root, path = sys.argv[1:4]
    out = sys.stdout.buffer
    try:
        if op == "stat":
            try:
                info = os.stat(path)
            except (FileNotFoundError, NotADirectoryError):
                out.write(b"none")
            else:
                out.write(f"{_kind(info.st_mode)} {info.st_size}".encode())
        elif op == "read":
            with open(path, "rb") as handle:
                out.write(b"+")
                while chunk := handle.read(1 << 20):
                    out.write(chunk)
        elif op == "list":
            with os.scandir(os.fsencode(path)) as scan:
                for entry in scan:
                    try:
                        kind = "dir" if entry.is_dir() else "file" if entry.is_file() else "other"
                    except OSError:
                        kind = "other"
                    out.write(kind.encode() + b"\t" + entry.name + b"\0")
        elif op == "write":
            _write(root, path, sys.stdin.buffer.read())
        else:
            raise ValueError(f"unknown operation {op}")
        out.flush()
    except OSError as err:
        outside = err.strerror == "outside the workspace"
        sys.stderr.write(
            json.dumps({"errno": err.errno or 0, "strerror": err.strerror or str(err), "outside": outside})
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
