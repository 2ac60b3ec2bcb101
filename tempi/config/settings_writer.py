"""Remembering the user's model and thinking level in settings.json, as pi does: a switch
made in a session (/model, Ctrl+P, /thinking, RPC) becomes the default of the next one.

Like pi, only the keys that changed are written, into the global file tempi reads (pi's
own settings.json when tempi has none); the other keys and unknown ones stay as they are.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from tempi.agent.model_spec import ModelSpec, ThinkingLevel
from tempi.config.errors import ConfigError, read_json_object, read_text
from tempi.config.paths import global_settings_path


def update_settings_file(changes: dict[str, Any], path: Path | None = None) -> bool:
    """Write `changes` over the file's top-level keys; False (nothing written) when the
    file cannot be read as a JSON object, which pi also leaves alone rather than replace."""
    path = path or global_settings_path()
    try:
        data = (
            read_json_object(path, read_text(path, "settings file"), "settings file") if path.exists() else {}
        )
    except ConfigError:
        return False
    data.update(changes)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".settings-", suffix=".json", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        os.replace(temporary, path)
    except OSError:
        return False
    return True


def remember_choice(model: ModelSpec | None = None, level: ThinkingLevel | None = None) -> None:
    """pi's defaultProvider/defaultModel and defaultThinkingLevel after a switch."""
    changes: dict[str, Any] = {}
    if model is not None:
        changes["defaultProvider"], changes["defaultModel"] = model.provider, model.id
    if level is not None:
        changes["defaultThinkingLevel"] = level
    if changes:
        update_settings_file(changes)
