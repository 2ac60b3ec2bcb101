"""pi's /settings, /scoped-models and /reload. A /settings change applies to the open session
at once and is saved to the global settings.json, so later sessions start with it, as in pi;
pi's entries tempi has no use for are listed with a note saying so. /scoped-models holds for
the session until Ctrl+S saves it, as pi's selector does."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

from tempi.agent.model_spec import ModelSpec, ThinkingLevel
from tempi.agent.scoped_models import ScopedModel
from tempi.agent.thinking_levels import supported_levels
from tempi.cli.errors import UserError
from tempi.cli.interactive.extras_host import ExtrasHost
from tempi.cli.interactive.picker import Picker, PickerItem
from tempi.cli.interactive.render import notice
from tempi.config.api_keys import has_configured_key
from tempi.config.enabled_models import ENABLED_MODELS_KEY, model_ref
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
    # None: tempi has no such setting, and `note` says why.
    apply: Apply | None
    note: str = ""


def _models(app: ExtrasHost) -> list[ModelSpec]:
    registry = app.planned.registry
    return [m for m in registry.models if has_configured_key(m.provider, registry)]


def _saved(app: ExtrasHost) -> dict[str, Any]:
    try:
        return merged_settings(app.cwd)
    except ConfigError:
        return {}  # the front end reported the broken file when it started


def _stored(*path: str, default: Any) -> Callable[[ExtrasHost], Awaitable[str]]:
    """The value settings.json holds at `path` (pi's default when unset), as shown."""

    async def current(app: ExtrasHost) -> str:
        value: Any = _saved(app)
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        value = default if value is None else value
        return str(value).lower() if isinstance(value, bool) else str(value)

    return current


def _nested(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    change: dict[str, Any] = {path[-1]: value}
    for key in reversed(path[:-1]):
        change = {key: change}
    return change


def _saves(*path: str, kind: type = bool) -> Apply:
    """A setting tempi reads when it next needs it: saving it is applying it."""

    async def apply(app: ExtrasHost, value: str) -> dict[str, Any]:
        return _nested(path, value == "true" if kind is bool else kind(value))

    return apply


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


async def _hide_thinking_now(app: ExtrasHost) -> str:
    return "true" if app.display.hide_thinking else "false"


async def _apply_hide_thinking(app: ExtrasHost, value: str) -> dict[str, Any]:
    app.display.hide_thinking = value == "true"  # answers from now on (Ctrl+T redraws the rest)
    return {"hideThinkingBlock": app.display.hide_thinking}


async def _skill_commands_now(app: ExtrasHost) -> str:
    return "true" if app.skills or not app.planned.skills else "false"


async def _apply_skill_commands(app: ExtrasHost, value: str) -> dict[str, Any]:
    app.skills = list(app.planned.skills) if value == "true" else []
    return {"enableSkillCommands": value == "true"}


async def _apply_autocomplete(app: ExtrasHost, value: str) -> dict[str, Any]:
    app.set_completion_rows(int(value))
    return {"autocompleteMaxVisible": int(value)}


ON_OFF = ["true", "false"]
QUEUE_MODES = ["one-at-a-time", "all"]
TERMINAL_DRAWS = "tempi's editor is drawn by prompt_toolkit, which has no such option"


def _fixed(values: list[str]) -> Callable[[ExtrasHost], list[str]]:
    return lambda app: values


# pi 0.73.1's /settings, in its order (a terminal without inline images: pi's 21 entries).
SETTINGS = [
    Setting("Auto-compact", "Automatically compact context when it gets too large", _auto_compact_now,
            _fixed(ON_OFF), _apply_auto_compact),
    Setting("Auto-resize images", "Resize large images to 2000x2000 max for better model compatibility",
            _stored("images", "autoResize", default=True), _fixed(ON_OFF), None,
            "tempi always shrinks images larger than that, as pi's default does"),
    Setting("Block images", "Prevent images from being sent to LLM providers",
            _stored("images", "blockImages", default=False), _fixed(ON_OFF), _saves("images", "blockImages")),
    Setting("Skill commands", "Register skills as /skill:name commands", _skill_commands_now,
            _fixed(ON_OFF), _apply_skill_commands),
    Setting("Show hardware cursor", "Show the terminal cursor while still positioning it for IME support",
            _stored("showHardwareCursor", default=False), _fixed(ON_OFF), None,
            "tempi's editor always shows the terminal's cursor"),
    Setting("Editor padding", "Horizontal padding for input editor (0-3)", _stored("editorPaddingX", default=0),
            _fixed(["0", "1", "2", "3"]), None, TERMINAL_DRAWS),
    Setting("Autocomplete max items", "Max visible items in autocomplete dropdown (3-20)",
            _stored("autocompleteMaxVisible", default=5), _fixed(["3", "5", "7", "10", "15", "20"]),
            _apply_autocomplete),
    Setting("Clear on shrink", "Clear empty rows when content shrinks (may cause flicker)",
            _stored("terminal", "clearOnShrink", default=False), _fixed(ON_OFF), None,
            "tempi's editor always clears the rows it no longer uses"),
    Setting("Terminal progress", "Show OSC 9;4 progress indicators in the terminal tab bar",
            _stored("terminal", "showTerminalProgress", default=False), _fixed(ON_OFF), None,
            "tempi sends no progress indicators to the terminal"),
    Setting("Steering mode", "Enter while streaming queues steering messages. 'one-at-a-time': deliver one, "
            "wait for response. 'all': deliver all at once.", _steering_now, _fixed(QUEUE_MODES), _apply_steering),
    Setting("Follow-up mode", "Alt+Enter queues follow-up messages until agent stops. 'one-at-a-time': deliver "
            "one, wait for response. 'all': deliver all at once.", _follow_up_now, _fixed(QUEUE_MODES),
            _apply_follow_up),
    Setting("Transport", "Preferred transport for providers that support multiple transports",
            _stored("transport", default="auto"), _fixed(["sse", "websocket", "websocket-cached", "auto"]), None,
            "tempi's providers stream over HTTP (server-sent events) only"),
    Setting("Hide thinking", "Hide thinking blocks in assistant responses", _hide_thinking_now, _fixed(ON_OFF),
            _apply_hide_thinking),
    Setting("Collapse changelog", "Show condensed changelog after updates",
            _stored("collapseChangelog", default=False), _fixed(ON_OFF), None,
            "tempi shows no changelog after updates (/changelog says where it is)"),
    Setting("Quiet startup", "Disable verbose printing at startup", _stored("quietStartup", default=False),
            _fixed(ON_OFF), _saves("quietStartup")),
    Setting("Install telemetry", "Send an anonymous version/update ping after changelog-detected updates",
            _stored("enableInstallTelemetry", default=True), _fixed(ON_OFF), None, "tempi sends no telemetry"),
    Setting("Double-escape action", "Action when pressing Escape twice with empty editor",
            _stored("doubleEscapeAction", default="tree"), _fixed(["tree", "fork", "none"]), None,
            "in tempi a second Esc does nothing; /tree and /fork open those views"),
    Setting("Tree filter mode", "Default filter when opening /tree", _stored("treeFilterMode", default="default"),
            _fixed(["default", "no-tools", "user-only", "labeled-only", "all"]), None,
            "tempi's /tree shows every entry and filters by what you type"),
    Setting("Warnings", "Enable or disable individual warnings", _stored("warnings", default="configure"),
            _fixed(["configure"]), None, "tempi has no Anthropic subscription login, so no such warning"),
    Setting("Thinking level", "Reasoning depth for thinking-capable models", _thinking_now,
            lambda app: list(supported_levels(app.footer.model)), _apply_thinking),
    Setting("Theme", "Color theme for the interface", _stored("theme", default="dark"), _fixed(["dark", "light"]),
            None, "tempi uses the terminal's own colours"),
]  # fmt: skip


def _saved_where(changes: dict[str, Any]) -> str:
    try:
        return f"saved to {save_settings(changes)}"
    except ConfigError as err:
        return f"not saved: {err}"


async def cmd_settings(app: ExtrasHost, arg: str) -> None:
    rows = [(setting, await setting.current(app)) for setting in SETTINGS]

    def open_values(setting: Setting, now: str) -> Callable[[Any], Awaitable[None]]:
        async def chosen(value: str) -> None:
            assert setting.apply is not None  # only settings tempi has open their values
            changes = await setting.apply(app, value)
            await app.show(notice(f"{setting.label}: {value} ({_saved_where(changes)})", "green"))

        async def show_values(_: Any) -> None:
            if setting.apply is None:
                await app.show(
                    notice(f"{setting.label}: {now}. Not used by tempi: {setting.note}.", "yellow")
                )
                return
            items = [PickerItem(v, v, "(current)" if v == now else "") for v in setting.values(app)]
            picker = Picker(f"{setting.label}: {setting.description}", items, chosen)
            picker.index = next((i for i, item in enumerate(items) if item.value == now), 0)
            app.open_picker(picker)

        return show_values

    items = [
        PickerItem(
            s.label,
            (s, now),
            f"{now}  · {s.description}" + ("" if s.apply else f" (not used by tempi: {s.note})"),
        )
        for s, now in rows
    ]

    async def on_choose(value: tuple[Setting, str]) -> None:
        await open_values(*value)(None)

    app.open_picker(Picker("Settings", items, on_choose))


async def cmd_scoped_models(app: ExtrasHost, arg: str) -> None:
    """pi's /scoped-models: the models Ctrl+P cycles through, for this session until Ctrl+S
    saves the choice to settings.json."""
    models = _models(app)
    if not models:
        await app.show(notice("No model has an API key configured.", "red"))
        return

    def chosen() -> list[ModelSpec]:
        scoped = {model_ref(s.model) for s in app.planned.scoped}
        return [m for m in models if model_ref(m) in scoped]

    def picker_at(index: int) -> Picker:
        enabled = chosen()
        items = [PickerItem(f"[{'x' if m in enabled else ' '}] {model_ref(m)}", m) for m in models]
        which = "" if enabled else ": all, until you choose some"
        title = (
            f"Models Ctrl+P cycles{which} (session-only; enter toggles, ctrl+s saves to settings, esc done)"
        )
        picker = Picker(title, items, toggle, on_save=save)
        picker.index = index
        return picker

    async def toggle(model: ModelSpec) -> None:
        enabled = chosen()
        if model in enabled:
            enabled.remove(model)
        else:
            enabled.append(model)
        app.planned.scoped = [ScopedModel(model=m) for m in models if m in enabled]
        shown = ", ".join(model_ref(m) for m in chosen()) or "all models"
        await app.show(notice(f"Ctrl+P cycles: {shown} (this session; ctrl+s saves)", "green"))
        app.open_picker(picker_at(models.index(model)))

    async def save() -> None:
        refs = [model_ref(m) for m in chosen()]
        where = _saved_where({ENABLED_MODELS_KEY: refs or None})
        await app.show(notice(f"Model selection saved to settings ({where})", "green"))

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
    app.skills = fresh.skills if fresh.settings.enable_skill_commands else []
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
