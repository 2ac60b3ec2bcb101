"""Load the SDK of the user's default model while the service waits for its first task.

A provider's SDK takes one to three seconds of CPU to import, and a fresh service would
otherwise pay it inside the first model call, after the client has already waited for the
service to start (issue 13: cold start to first token). Only the default model's provider
loads, so a box with one provider's key never imports the other's SDK."""

from __future__ import annotations

import asyncio
import sys


def default_model_api() -> str | None:
    """The API of the model a `tempi -p` with no --model would pick from the global settings
    and the keys configured, or None when that cannot be told here."""
    from tempi.agent.model_selection import ModelSelectionError, select_model
    from tempi.config.api_keys import has_configured_key
    from tempi.config.errors import ConfigError
    from tempi.config.models_json import load_model_registry
    from tempi.config.settings import global_settings

    try:
        registry = load_model_registry()
        settings = global_settings()
        selection = select_model(
            registry,
            default_provider=settings.get("defaultProvider"),
            default_model=settings.get("defaultModel"),
            key_available=lambda provider: has_configured_key(provider, registry),
        )
    except (ModelSelectionError, ConfigError):
        return None  # the client reports these, with the command line that caused them
    return selection.model.api


async def preload_default_provider() -> str | None:
    from tempi.activities.llm.stream import load_provider

    api = await asyncio.to_thread(default_model_api)
    if api is None:
        return None
    try:
        await load_provider(api)
    except Exception as err:  # the first call reports a provider that cannot load, in the session
        print(f"tempi: could not preload the {api} provider: {err}", file=sys.stderr, flush=True)
        return None
    return api
