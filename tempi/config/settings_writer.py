"""Remembering the user's model and thinking level in settings.json, as pi does: a switch
made in a session (/model, Ctrl+P, /thinking, RPC) becomes the default of the next one.

Like pi, only the keys that changed are written, into the global file tempi reads (pi's
own settings.json when tempi has none); the other keys and unknown ones stay as they are.
"""

from __future__ import annotations

import contextlib
from typing import Any

from tempi.agent.model_spec import ModelSpec, ThinkingLevel
from tempi.config.errors import ConfigError
from tempi.config.settings_edit import save_settings


def remember_choice(model: ModelSpec | None = None, level: ThinkingLevel | None = None) -> None:
    """pi's defaultProvider/defaultModel and defaultThinkingLevel after a switch."""
    changes: dict[str, Any] = {}
    if model is not None:
        changes["defaultProvider"], changes["defaultModel"] = model.provider, model.id
    if level is not None:
        changes["defaultThinkingLevel"] = level
    # A switch must not fail over a settings file the user broke; pi leaves it too.
    if changes:
        with contextlib.suppress(ConfigError):
            save_settings(changes)
