"""A channel's own model and thinking level, from `<dir>/<channel>/settings.json` (pi's
settings keys), applied to its sessions before every run so an edit takes effect at once."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from temporalio.exceptions import ApplicationError

from tempi.agent.model_selection import ModelSelectionError, select_model
from tempi.agent.model_spec import ThinkingLevel
from tempi.client.session import SessionClient
from tempi.config.models_json import load_model_registry


class ChannelSettings(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    provider: str | None = Field(default=None, alias="defaultProvider")
    model: str | None = Field(default=None, alias="defaultModel")
    thinking_level: ThinkingLevel | None = Field(default=None, alias="defaultThinkingLevel")


def _refuse(path: Path, problem: str) -> ApplicationError:
    return ApplicationError(
        f"{path}: {problem}. Fix or delete it (keys: defaultProvider, defaultModel, defaultThinkingLevel).",
        type="ChannelSettingsError",
        non_retryable=True,
    )


def read_channel_settings(path: Path) -> ChannelSettings | None:
    try:
        raw = path.read_text()
    except FileNotFoundError:
        return None
    try:
        return ChannelSettings.model_validate(json.loads(raw))
    except (ValueError, ValidationError) as err:
        raise _refuse(path, str(err).splitlines()[0]) from err


async def apply_channel_settings(session: SessionClient, path: Path) -> None:
    settings = read_channel_settings(path)
    if settings is None:
        return
    if settings.model or settings.provider:
        try:
            chosen = select_model(load_model_registry(), settings.provider, settings.model)
        except ModelSelectionError as err:
            raise _refuse(path, str(err)) from err
        current = (await session.state()).model
        if (current.provider, current.id) != (chosen.model.provider, chosen.model.id):
            await session.set_model(chosen.model, remember=False)
    if settings.thinking_level and (await session.state()).thinking_level != settings.thinking_level:
        await session.set_thinking_level(settings.thinking_level)
