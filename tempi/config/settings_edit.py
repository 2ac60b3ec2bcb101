"""Writing settings.json the way pi's /settings does: the user's global file, changed key by
key, everything else in it kept (pi's keys that tempi does not use included)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from tempi.config.errors import ConfigError, read_json_object, read_text
from tempi.config.paths import global_settings_path


def save_settings(changes: dict[str, Any], path: Path | None = None) -> Path:
    """Apply `changes` (camelCase keys; a nested object merges key by key; None removes the
    key) to the global settings file and return its path. Raises ConfigError when the file
    cannot be read or written: a broken file is left for its owner to fix, not overwritten."""
    target = path or global_settings_path()
    data: dict[str, Any] = (
        dict(read_json_object(target, read_text(target, "settings file"), "settings file"))
        if target.exists()
        else {}
    )
    _apply(data, changes)
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # Another tempi may read the file at any moment: it sees the old or the new one whole.
        fd, tmp = tempfile.mkstemp(prefix=".settings-", dir=target.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, target)
    except OSError as err:
        raise ConfigError(f"Cannot write settings file {target}: {err}") from None
    return target


def _apply(data: dict[str, Any], changes: dict[str, Any]) -> None:
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        elif isinstance(value, dict) and isinstance(data.get(key), dict):
            _apply(data[key], value)
        else:
            data[key] = value


def read_global_settings(path: Path | None = None) -> dict[str, Any]:
    """The global settings file's JSON object as written ({} when absent or unreadable)."""
    target = path or global_settings_path()
    try:
        return dict(read_json_object(target, read_text(target, "settings file"), "settings file"))
    except ConfigError:
        return {}
