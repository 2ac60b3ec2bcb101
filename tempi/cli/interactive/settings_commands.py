"""pi's /settings, /scoped-models and /reload. A change applies to the open session at once
and is saved to the global settings.json, so later sessions start with it, as in pi."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

from tempi.agent.model_spec import ModelSpec, ThinkingLevel
from tempi.agent.scoped_models import ScopedModel
from tempi.agent.thinking_levels import DEFAULT_THINKING_LEVEL, supported_levels
from tempi.cli.errors import UserError
from tempi.cli.interactive.extras_host import ExtrasHost
from tempi.cli.interactive.picker import Picker, PickerItem
from tempi.cli.interactive.render import notice
from tempi.config.api_keys import has_configured_key
from tempi.config.enabled_models import ENABLED_MODELS_KEY, enabled_patterns, matches, model_ref
from tempi.config.errors import ConfigError
from tempi.config.settings import QueueMode, merged_settings
from tempi.config.settings_edit import save_settings

Apply = Callable[[ExtrasHost, str], Awaitable[dict[str, Any]]]


@dataclass
class Setting:
    label: str
    description: str
    # The current value and the values to choose from.
    current: Callable[[ExtrasHost], Awaitable[str]]
    values: Callable[[ExtrasHost], list[str]]
    # Applies a value to the open session; returns the settings.json change that keeps it.
    apply: Apply


def _models(app: ExtrasHost) -> list[ModelSpec]:
    registry = app.planned.registry
    return [m for m in registry.models if has_configured_key(m.provider, registry)]


async def _auto_compact_now(app: ExtrasHost) -> str:
    return "true" if (await app.session.state()).auto_compaction_enabled else "false"


async def _apply_auto_compact(app: ExtrasHost, value: str) -> dict[str, Any]:
    enabled = value == "true"
    await app.session.set_auto_compaction(enabled)
    app.planned.options.compaction.enabled = enabled
    return {"compaction": {"enabled": enabled}}


async def _steering_now(app: ExtrasHost) -> str:
    return (await app.session.state()).steering_mode


async def _apply_steering(app: ExtrasHost, value: str) -> dict[str, Any]:
    mode: QueueMode = "all" if value == "all" else "one-at-a-time"
    await app.session.set_steering_mode(mode)
    app.planned.options.steering_mode = mode
    return {"steeringMode": mode}


async def _follow_up_now(app: ExtrasHost) -> str:
    return (await app.session.state()).follow_up_mode


async def _apply_follow_up(app: ExtrasHost, value: str) -> dict[str, Any]:
    mode: QueueMode = "all" if value == "all" else "one-at-a-time"
    await app.session.set_follow_up_mode(mode)
    app.planned.options.follow_up_mode = mode
    return {"followUpMode": mode}


async def _thinking_now(app: ExtrasHost) -> str:
    return (await app.session.state()).thinking_level


async def _apply_thinking(app: ExtrasHost, value: str) -> dict[str, Any]:
    chosen = await app.session.set_thinking_level(cast(ThinkingLevel, value))  # one of the listed levels
    app.planned.options.thinking_level = chosen
    await app.refresh_footer()
    return {"defaultThinkingLevel": chosen}


async def _model_now(app: ExtrasHost) -> str:
    return model_ref((await app.session.state()).model)


async def _apply_model(app: ExtrasHost, value: str) -> dict[str, Any]:
    model = next(m for m in _models(app) if model_ref(m) == value)
    level = await app.session.set_model(
        model, default_level=app.planned.settings.default_thinking_level or DEFAULT_THINKING_LEVEL
    )
    app.planned.options.model, app.planned.options.thinking_level = model, level
    await app.refresh_footer()
    return {"defaultProvider": model.provider, "defaultModel": model.id}


ON_OFF = ["true", "false"]
QUEUE_MODES = ["one-at-a-time", "all"]

SETTINGS = [
    Setting("Auto-compact", "compact the context when it gets too large", _auto_compact_now,
            lambda app: ON_OFF, _apply_auto_compact),
    Setting("Steering mode", "Enter while the agent works: deliver queued steering one at a time, or all at once",
            _steering_now, lambda app: QUEUE_MODES, _apply_steering),
    Setting("Follow-up mode", "Alt+Enter follow-ups: deliver one at a time, or all at once when the agent stops",
            _follow_up_now, lambda app: QUEUE_MODES, _apply_follow_up),
    Setting("Thinking level", "reasoning depth for thinking-capable models (also the default for new sessions)",
            _thinking_now, lambda app: list(supported_levels(app.footer.model)), _apply_thinking),
    Setting("Default model", "the model new sessions start with (switches this session too)", _model_now,
            lambda app: [model_ref(m) for m in _models(app)], _apply_model),
]  # fmt: skip


def _enabled_patterns(app: ExtrasHost) -> list[str]:
    """The saved enabledModels in effect here (pi's and tempi's settings merged)."""
    try:
        return enabled_patterns(merged_settings(app.cwd))
    except ConfigError:
        return []  # the front end reported the broken file when it started


def _saved_where(changes: dict[str, Any]) -> str:
    try:
        return f"saved to {save_settings(changes)}"
    except ConfigError as err:
        return f"not saved: {err}"


async def cmd_settings(app: ExtrasHost, arg: str) -> None:
    rows = [(setting, await setting.current(app)) for setting in SETTINGS]

    def open_values(setting: Setting, now: str) -> Callable[[Any], Awaitable[None]]:
        async def chosen(value: str) -> None:
            changes = await setting.apply(app, value)
            await app.show(notice(f"{setting.label}: {value} ({_saved_where(changes)})", "green"))

        async def show_values(_: Any) -> None:
            items = [PickerItem(v, v, "(current)" if v == now else "") for v in setting.values(app)]
            picker = Picker(f"{setting.label}: {setting.description}", items, chosen)
            picker.index = next((i for i, item in enumerate(items) if item.value == now), 0)
            app.open_picker(picker)

        return show_values

    items = [PickerItem(s.label, (s, now), f"{now}  · {s.description}") for s, now in rows]

    async def on_choose(value: tuple[Setting, str]) -> None:
        await open_values(*value)(None)

    app.open_picker(Picker("Settings", items, on_choose))


async def cmd_scoped_models(app: ExtrasHost, arg: str) -> None:
    models = _models(app)
    if not models:
        await app.show(notice("No model has an API key configured.", "red"))
        return

    def picker_at(index: int) -> Picker:
        patterns = _enabled_patterns(app)
        items = [
            PickerItem(
                f"[{'x' if patterns and any(matches(m, p) for p in patterns) else ' '}] {model_ref(m)}", m
            )
            for m in models
        ]
        title = (
            "Models Ctrl+P cycles (enter toggles, esc done)"
            if patterns
            else "Models Ctrl+P cycles: all, until you choose some (enter toggles, esc done)"
        )
        picker = Picker(title, items, toggle)
        picker.index = index
        return picker

    async def toggle(model: ModelSpec) -> None:
        patterns = _enabled_patterns(app)
        chosen = [m for m in models if patterns and any(matches(m, p) for p in patterns)]
        if model in chosen:
            chosen.remove(model)
        else:
            chosen.append(model)
        refs = [model_ref(m) for m in models if m in chosen]
        where = _saved_where({ENABLED_MODELS_KEY: refs or None})
        app.planned.scoped = [ScopedModel(model=m) for m in models if m in chosen]
        shown = ", ".join(refs) if refs else "all models"
        await app.show(notice(f"Ctrl+P cycles: {shown} ({where})", "green"))
        app.open_picker(picker_at(models.index(model)))

    app.open_picker(picker_at(0))


async def cmd_reload(app: ExtrasHost, arg: str) -> None:
    """Read models.json, settings, context files, prompt templates and skills again."""
    from tempi.cli.plan import plan_run

    if app.args is None:
        await app.show(
            notice("Nothing to reload: this view was not started from the command line.", "yellow")
        )
        return
    try:
        fresh = plan_run(app.args, app.cwd, reloading=True)
    except UserError as err:
        await app.show(notice(f"Reload failed; the earlier configuration stays: {err}", "red"))
        return
    state = await app.session.state()
    old_prompt = app.planned.options.system_prompt
    # The open session keeps the model and level it runs with; new sessions start like it.
    fresh.options.model, fresh.options.thinking_level = state.model, state.thinking_level
    app.planned = fresh
    app.skills = fresh.skills
    settings = fresh.settings
    await app.session.set_auto_compaction(settings.compaction.enabled)
    await app.session.set_steering_mode(settings.steering_mode)
    await app.session.set_follow_up_mode(settings.follow_up_mode)
    await app.refresh_footer()
    parts = [
        f"{len(fresh.registry.models)} models",
        f"{len(fresh.templates)} prompt templates",
        f"{len(app.skills)} skills",
        "settings",
    ]
    note = (
        " The context files or skills changed: the new system prompt applies to sessions started "
        "from now (/new); this one keeps the prompt it started with."
        if fresh.options.system_prompt != old_prompt
        else ""
    )
    await app.show(notice(f"Reloaded {', '.join(parts)}.{note}", "green"))
