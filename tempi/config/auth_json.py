"""auth.json: logins and API keys, in pi's format and shared with pi.

One JSON object keyed by provider id; each entry is `{"type": "api_key", "key": ...}` (the key
a literal, an environment variable's name or a `!command`) or `{"type": "oauth", "access",
"refresh", "expires" (ms since the epoch), ...}` as `/login` (pi's or tempi's) writes it. tempi reads its own
`$TEMPI_HOME/auth.json`, or pi's `$PI_CODING_AGENT_DIR/auth.json` when it has none, so a login
made in pi works here and a refresh made here is seen by pi. Changes are written under the lock
pi takes (see file_lock.py), in a file of mode 0600 in a directory of mode 0700.

Read only by worker and CLI processes, never by workflow code: the entries are secrets.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tempi.config.errors import ConfigError, read_json_object
from tempi.config.file_lock import LockBusy, locked
from tempi.config.paths import own_or_pis

AUTH_FILE = "auth.json"

Entries = dict[str, Any]


def auth_json_path() -> Path:
    return own_or_pis(AUTH_FILE)


def _parse(path: Path, text: str) -> Entries:
    return read_json_object(path, text, "auth file") if text.strip() else {}


# Parsed files by path, with the (inode, mtime, size) they were read at: the CLI asks whether
# a provider has a key once per model it lists.
_read_cache: dict[Path, tuple[tuple[int, int, int], Entries]] = {}


def read_auth(path: Path | None = None) -> Entries:
    """The entries of auth.json ({} when there is none); not to be modified. A file caught
    half-written by a program that does not write atomically (pi) is read again under the lock."""
    path = path or auth_json_path()
    try:
        info = path.stat()
        stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
        cached = _read_cache.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Cannot read auth file {path}: {exc}") from None
    try:
        entries = _parse(path, text)
    except ConfigError:
        return update_auth(lambda entries: None, path)
    _read_cache[path] = (stamp, entries)
    return entries


def _write(path: Path, entries: Entries) -> None:
    target = Path(os.path.realpath(path))
    fd, temporary = tempfile.mkstemp(prefix=".auth-", suffix=".json", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(entries, out, indent=2)
        os.chmod(temporary, 0o600)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def update_auth(change: Callable[[Entries], Entries | None], path: Path | None = None) -> Entries:
    """Read auth.json under pi's lock, let `change` return new entries (None: leave the
    file as it is), write them, and return what the file holds afterwards."""
    path = path or auth_json_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        # proper-lockfile locks an existing file; pi creates it as "{}" too.
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
            out.write("{}")
    except FileExistsError:
        pass
    try:
        with locked(path) as held:
            entries = _parse(path, path.read_text(encoding="utf-8"))
            changed = change(dict(entries))
            if changed is None:
                return entries
            held.check()
            _write(path, changed)
            return changed
    except LockBusy as exc:
        raise ConfigError(f"Cannot update {path}: {exc}; is a pi or tempi process stuck?") from None
    except OSError as exc:
        raise ConfigError(f"Cannot update auth file {path}: {exc}") from None


def remove_entry(provider: str, path: Path | None = None) -> bool:
    """Forget the login or key of `provider` (/logout); whether there was one."""
    path = path or auth_json_path()
    if provider not in read_auth(path):
        return False
    removed: list[bool] = []

    def without(entries: Entries) -> Entries | None:
        removed.append(entries.pop(provider, None) is not None)
        return entries if removed[-1] else None

    update_auth(without, path)
    return removed[-1]
