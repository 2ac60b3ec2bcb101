"""Files in a container through the Docker archive API, so nothing needs to run inside it.

The archive API sees the container's root filesystem and its volume and bind mounts, but
not tmpfs mounts (those exist only inside the container), which is why sandboxes mount
volumes wherever tools may write.
"""

from __future__ import annotations

import base64
import io
import json
import tarfile
import time
from dataclasses import dataclass
from typing import IO, Any

import requests

from tempi.activities.sandbox.errors import SandboxUnavailableError, archive_os_error, engine_errors
from tempi.activities.tools.backend import EntryKind

# Go's os.FileMode type bits, which the archive API reports instead of st_mode.
_GO_DIR = 1 << 31
_GO_SYMLINK = 1 << 27
_GO_TYPE_BITS = _GO_DIR | _GO_SYMLINK | (1 << 26) | (1 << 25) | (1 << 24) | (1 << 21) | (1 << 19)
_GO_SETUID, _GO_SETGID, _GO_STICKY = 1 << 23, 1 << 22, 1 << 20


@dataclass(frozen=True)
class PathStat:
    """What is at a path, without following a final symlink."""

    kind: EntryKind | None  # None for a symlink
    size: int
    mode: int  # permission bits, as in st_mode & 0o7777
    link_target: str  # for a symlink: the absolute path it resolves to

    @classmethod
    def from_header(cls, header: str) -> PathStat:
        info = json.loads(base64.b64decode(header))
        go_mode = int(info["mode"])
        kind: EntryKind | None
        if go_mode & _GO_SYMLINK:
            kind = None
        elif go_mode & _GO_DIR:
            kind = "dir"
        elif go_mode & _GO_TYPE_BITS:
            kind = "other"
        else:
            kind = "file"
        mode = go_mode & 0o777
        for go_bit, bit in ((_GO_SETUID, 0o4000), (_GO_SETGID, 0o2000), (_GO_STICKY, 0o1000)):
            if go_mode & go_bit:
                mode |= bit
        return cls(kind, int(info["size"]), mode, str(info.get("linkTarget") or ""))


def _url(api: Any, container_id: str) -> str:
    return str(api._url("/containers/{0}/archive", container_id))


def _message(response: requests.Response) -> str:
    try:
        return str(response.json().get("message", ""))
    except ValueError:
        return response.text


def _ensure_container(api: Any, container_id: str) -> None:
    """HEAD answers carry no body, so a 404 there may mean the container itself is gone."""
    with engine_errors(container_id):
        api.inspect_container(container_id)


def head_stat(api: Any, container_id: str, path: str) -> PathStat | None:
    """lstat of `path`, or None when nothing is there (a missing parent or a file as parent)."""
    with engine_errors(container_id):
        response = api.head(_url(api, container_id), params={"path": path})
    if response.status_code == 200:
        return PathStat.from_header(response.headers["X-Docker-Container-Path-Stat"])
    _ensure_container(api, container_id)
    if response.status_code in (404, 500):  # 500: a parent is not a directory
        return None
    raise archive_os_error(response.status_code, response.reason, path)


class ArchiveFile:
    """A file's content read from a streamed archive; close it to end the request."""

    def __init__(self, response: requests.Response) -> None:
        self._response = response
        self._tar = tarfile.open(fileobj=response.raw, mode="r|")  # noqa: SIM115 closed by close()
        member = self._tar.next()
        handle = self._tar.extractfile(member) if member is not None else None
        self._handle: IO[bytes] = handle if handle is not None else io.BytesIO()

    def read(self, size: int = -1) -> bytes:
        return self._handle.read(size)

    def close(self) -> None:
        self._tar.close()
        self._response.close()


def open_file(api: Any, container_id: str, path: str) -> ArchiveFile:
    """The content of the regular file at `path` (not a symlink: resolve it first)."""
    with engine_errors(container_id):
        response = api.get(
            _url(api, container_id),
            params={"path": path},
            headers={"Accept-Encoding": "identity"},  # read as a plain tar stream
            stream=True,
        )
    if response.status_code != 200:
        message = _message(response)
        response.close()
        if "no such container" in message.lower():
            raise SandboxUnavailableError(f"The sandbox container {container_id[:12]} no longer exists")
        raise archive_os_error(response.status_code, message, path)
    try:
        return ArchiveFile(response)
    except (tarfile.TarError, OSError):
        response.close()
        raise OSError(f"The archive of {path} could not be read") from None


@dataclass(frozen=True)
class Owner:
    uid: int
    gid: int


def file_tar(new_dirs: list[str], file_name: str, data: bytes, mode: int, owner: Owner) -> bytes:
    """A tar holding `new_dirs` (each inside the one before) and the file in the last of them."""
    buffer = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        prefix = ""
        for directory in new_dirs:
            prefix = f"{prefix}{directory}/"
            entry = tarfile.TarInfo(prefix.rstrip("/"))
            entry.type, entry.mode, entry.mtime = tarfile.DIRTYPE, 0o755, now
            entry.uid, entry.gid = owner.uid, owner.gid
            tar.addfile(entry)
        entry = tarfile.TarInfo(prefix + file_name)
        entry.size, entry.mode, entry.mtime = len(data), mode, now
        entry.uid, entry.gid = owner.uid, owner.gid
        tar.addfile(entry, io.BytesIO(data))
    return buffer.getvalue()


def put_tar(api: Any, container_id: str, directory: str, tar: bytes) -> None:
    """Unpack `tar` into the existing `directory`; never replaces a directory by a file."""
    with engine_errors(container_id):
        response = api.put(
            _url(api, container_id),
            params={"path": directory, "noOverwriteDirNonDir": "true"},
            data=tar,
        )
    if response.status_code != 200:
        message = _message(response)
        if "no such container" in message.lower():
            raise SandboxUnavailableError(f"The sandbox container {container_id[:12]} no longer exists")
        raise archive_os_error(response.status_code, message, directory)
