"""The slash commands of the interactive mode. Each takes the app and the text after its name."""

from __future__ import annotations

import argparse
import base64
import contextlib
import shutil
import subprocess
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from prompt_toolkit.buffer import Buffer
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from tempi.agent.model_spec import THINKING_LEVELS, ModelSpec, ThinkingLevel
from tempi.agent.prompt_templates import PromptTemplate
from tempi.agent.session_entries import MessageEntry
from tempi.agent.skills import Skill
from tempi.agent.thinking_levels import DEFAULT_THINKING_LEVEL, supported_levels
from tempi.cli.html_export import SessionSetup, default_export_path, export_session_html
from tempi.cli.interactive import login_commands, notes_commands, session_copies, settings_commands
from tempi.cli.interactive.footer import FooterInfo
from tempi.cli.interactive.picker import Picker, PickerItem
from tempi.cli.interactive.render import Display, LiveView, notice
from tempi.cli.interactive.tree_command import open_tree
from tempi.cli.plan import PlannedRun
from tempi.cli.session_choice import OpenSession
from tempi.cli.slash_input import names_a_resource
from tempi.client import SessionClient, SessionOptions, SessionRefused, SessionService
from tempi.client.transcript import context_messages, fork_points, load_at_leaf, session_stats, user_text
from tempi.config.api_keys import has_configured_key
from tempi.store.errors import SessionFileError
from tempi.store.loading import LoadedSession


class CommandHost(Protocol):
    """What the commands need of the interactive app."""

    planned: PlannedRun
    args: argparse.Namespace | None
    skills: list[Skill]
    service: SessionService
    cwd: Path
    session_dir: Path | None
    footer: FooterInfo
    display: Display
    view: LiveView
    input: Buffer
    opened: OpenSession

    @property
    def session(self) -> SessionClient: ...

    async def show(self, *blocks: RenderableType) -> None: ...

    async def write_raw(self, text: str) -> None: ...

    def open_picker(self, picker: Picker) -> None: ...

    def set_completion_rows(self, rows: int) -> None: ...

    def spawn(self, coro: Awaitable[Any]) -> None: ...

    async def ask(self, message: str, placeholder: str | None = None) -> str: ...

    async def run_dialog(self, work: Coroutine[Any, Any, Any]) -> bool: ...

    async def refresh_footer(self, *, estimate_context: bool = False) -> None: ...

    async def use_session(self, opened: OpenSession, *, history: bool) -> None: ...

    def quit(self) -> None: ...


Handler = Callable[[CommandHost, str], Awaitable[None]]

HOTKEYS = [
    ("Enter", "send; while the agent works, queue a steering message"),
    ("Alt+Enter", "while the agent works, queue a follow-up for when it is done"),
    ("Shift+Enter, Ctrl+J, or \\ then Enter", "new line"),
    ("Esc", "abort the run (or a running !command, or a /login); queued messages come back to the editor"),
    ("Alt+Up", "take the queued messages back into the editor"),
    ("Ctrl+C", "clear the input; twice: quit (the session keeps its state)"),
    ("Ctrl+D", "quit, on an empty input"),
    ("Ctrl+Z", "suspend to the shell (fg resumes)"),
    ("Ctrl+P / Shift+Ctrl+P", "cycle models"),
    ("Ctrl+L", "select a model"),
    ("Shift+Tab", "cycle the thinking level"),
    ("Ctrl+O", "expand or collapse tool output"),
    ("Ctrl+T", "show or hide thinking blocks"),
    ("Ctrl+G", "edit the input in $VISUAL or $EDITOR"),
    ("Ctrl+V", "paste an image from the clipboard (its file path)"),
    ("Tab", "complete /commands and @files"),
    ("Up / Down", "earlier prompts (history)"),
    ("Ctrl+A/E/K/U/W, Alt+B/F", "Emacs-style editing"),
    ("!command", "run a shell command; its output joins the context (!!: it does not)"),
]


@dataclass
class Command:
    name: str
    summary: str
    run: Handler


# --- models and thinking --------------------------------------------------------------------


def available_models(app: CommandHost) -> list[ModelSpec]:
    registry = app.planned.registry
    return [m for m in registry.models if has_configured_key(m.provider, registry)]


def cycled_models(app: CommandHost) -> list[ModelSpec]:
    """What Ctrl+P cycles: the scope (--models, else /scoped-models) among the models with a
    key, or every model with a key when there is no scope."""
    available = available_models(app)
    keyed = {(m.provider, m.id) for m in available}
    scoped = [s.model for s in app.planned.scoped if (s.model.provider, s.model.id) in keyed]
    return scoped or available


async def choose_model(app: CommandHost, model: ModelSpec) -> None:
    level = await app.session.set_model(
        model, default_level=app.planned.settings.default_thinking_level or DEFAULT_THINKING_LEVEL
    )
    app.planned.options.model, app.planned.options.thinking_level = model, level
    await app.refresh_footer()
    await app.show(notice(f"Model: {model.provider}/{model.id} (thinking {level})", "green"))


async def cmd_model(app: CommandHost, arg: str) -> None:
    models = available_models(app)
    if arg:
        models = [m for m in models if arg.lower() in f"{m.provider}/{m.id} {m.name}".lower()]
        if len(models) == 1:
            await choose_model(app, models[0])
            return
        if not models:
            await app.show(notice(f"No model with an API key matches {arg!r}.", "red"))
            return
    if not models:
        await app.show(notice("No model has an API key configured.", "red"))
        return
    current = app.footer.model
    items = [
        PickerItem(
            f"{m.provider}/{m.id}",
            m,
            ("(current)" if (m.provider, m.id) == (current.provider, current.id) else "")
            + (" reasoning" if m.reasoning else ""),
        )
        for m in models
    ]
    app.open_picker(Picker("Choose a model", items, lambda m: choose_model(app, m)))


async def _set_thinking(app: CommandHost, level: ThinkingLevel) -> None:
    chosen = await app.session.set_thinking_level(level)
    app.planned.options.thinking_level = chosen
    await app.refresh_footer()
    await app.show(notice(f"Thinking level: {chosen}", "green"))


async def cmd_thinking(app: CommandHost, arg: str) -> None:
    if arg:
        if arg not in THINKING_LEVELS:
            await app.show(
                notice(f"Unknown thinking level {arg!r}; one of {', '.join(THINKING_LEVELS)}.", "red")
            )
            return
        await _set_thinking(app, arg)
        return
    levels = supported_levels(app.footer.model)
    items = [PickerItem(lvl, lvl, "(current)" if lvl == app.footer.thinking_level else "") for lvl in levels]
    app.open_picker(Picker("Thinking level", items, lambda lvl: _set_thinking(app, lvl)))


# --- context -----------------------------------------------------------------------------


async def cmd_compact(app: CommandHost, arg: str) -> None:
    app.view.compacting = True
    # A failure needs no message here: the session's compaction_end event says why.
    with contextlib.suppress(SessionRefused):
        await app.session.compact(arg or None)
    await app.refresh_footer(estimate_context=True)


# --- sessions -------------------------------------------------------------------------------


async def _options_now(app: CommandHost) -> SessionOptions:
    """The options the next session starts with: the current session's model and level."""
    state = await app.session.state()
    options = app.planned.options
    options.model, options.thinking_level = state.model, state.thinking_level
    return options


async def _switch_to_file(app: CommandHost, path: Path) -> None:
    options = await _options_now(app)
    try:
        session = await app.service.resume(path, options, find_model=app.planned.registry.find)
    except SessionFileError as err:
        await app.show(notice(str(err), "red"))
        return
    await app.use_session(OpenSession(session), history=True)


async def cmd_new(app: CommandHost, arg: str) -> None:
    session = await app.service.start(await _options_now(app), session_dir=app.session_dir)
    await app.use_session(OpenSession(session), history=False)
    await app.show(notice(f"New session {session.session_id[:8]}.", "green"))


async def cmd_resume(app: CommandHost, arg: str) -> None:
    sessions = [s for s in app.service.list(app.cwd) if s.id != app.session.session_id]
    if not sessions:
        await app.show(notice("No other session in this directory.", "yellow"))
        return
    items = [
        PickerItem(
            (s.name or (s.first_message or "(no messages)")).replace("\n", " ")[:70],
            s.path,
            f"{s.modified.astimezone():%Y-%m-%d %H:%M}  {s.id[:8]}  {s.message_count} msgs",
        )
        for s in sessions[:100]
    ]
    app.open_picker(Picker("Resume a session", items, lambda path: _switch_to_file(app, path)))


async def _loaded(app: CommandHost) -> tuple[LoadedSession | None, str]:
    state = await app.session.state()
    loaded, _ = await load_at_leaf(app.service.store, state.session_file, state.leaf_id)
    return loaded, state.session_file


async def cmd_fork(app: CommandHost, arg: str) -> None:
    loaded, session_file = await _loaded(app)
    points = fork_points(loaded)
    if loaded is None or not points:
        await app.show(notice("Nothing to fork from yet: send a message first.", "yellow"))
        return

    async def fork_at(entry_id: str) -> None:
        entry = loaded.tree.get(entry_id)
        assert isinstance(entry, MessageEntry)  # fork points are user messages
        session = await app.service.fork(
            Path(session_file), entry.parent_id, await _options_now(app), find_model=app.planned.registry.find
        )
        await app.use_session(OpenSession(session), history=True)
        text = user_text(entry.message.to_json_dict())
        app.input.text = text
        app.input.cursor_position = len(text)
        await app.show(notice("Forked: edit the message and send it to take the new branch.", "green"))

    items = [PickerItem(p["text"].replace("\n", " ")[:90], p["entryId"]) for p in reversed(points)]
    app.open_picker(Picker("Fork from a message", items, fork_at))


async def cmd_tree(app: CommandHost, arg: str) -> None:
    await open_tree(app)


async def cmd_name(app: CommandHost, arg: str) -> None:
    if not arg.strip():
        name = (await app.session.state()).session_name
        await app.show(
            notice(f"Session name: {name}" if name else "The session has no name; /name NAME sets one.")
        )
        return
    await app.session.rename(arg.strip())
    app.footer.session_name = arg.strip()


async def cmd_export(app: CommandHost, arg: str) -> None:
    _, session_file = await _loaded(app)
    source = Path(session_file)
    if not source.is_file():
        await app.show(
            notice("Nothing to export yet: the session file is written after the first answer.", "yellow")
        )
        return
    target = Path(arg).expanduser() if arg else app.cwd / default_export_path(source)
    export_session_html(app.service.store, source, target, await SessionSetup.of(app.session))
    await app.show(notice(f"Exported to {target}", "green"))


async def cmd_session(app: CommandHost, arg: str) -> None:
    state = await app.session.state()
    loaded, leaf = await load_at_leaf(app.service.store, state.session_file, state.leaf_id)
    stats = session_stats(context_messages(loaded, leaf), state.model, state.session_file, state.session_id)
    table = Table(show_header=False, box=None, padding=(0, 2))
    tokens = stats["tokens"]
    rows = [
        ("Session", f"{state.session_id}{'  ' + state.session_name if state.session_name else ''}"),
        ("File", state.session_file),
        ("Messages", f"{stats['userMessages']} user, {stats['assistantMessages']} assistant, "
                     f"{stats['toolCalls']} tool calls, {stats['totalMessages']} in all"),
        ("Tokens", f"{tokens['input']:,} in, {tokens['output']:,} out, {tokens['cacheRead']:,} cache read, "
                   f"{tokens['cacheWrite']:,} cache write"),
        ("Cost", f"${stats['cost']:.4f}"),
        ("Context", app.footer.context_text()),
    ]  # fmt: skip
    for key, value in rows:
        table.add_row(Text(key, style="bold"), Text(value, overflow="fold"))
    await app.show(table)


def _to_clipboard(text: str) -> bool:
    for tool in (["pbcopy"], ["wl-copy"], ["xclip", "-selection", "clipboard"], ["xsel", "-b", "-i"]):
        if shutil.which(tool[0]):
            try:
                subprocess.run(tool, input=text.encode(), timeout=5, check=True)
                return True
            except (OSError, subprocess.SubprocessError):
                continue
    return False


async def cmd_copy(app: CommandHost, arg: str) -> None:
    text = (await app.session.state()).last_assistant_text
    if not text:
        await app.show(notice("No answer to copy yet.", "yellow"))
        return
    if not _to_clipboard(text):
        # OSC 52: the terminal itself (also over ssh and in tmux) puts it on the clipboard.
        osc = f"\x1b]52;c;{base64.b64encode(text.encode()).decode()}\x07"
        await app.write_raw(osc)
    await app.show(notice(f"Copied the last answer ({len(text)} characters).", "green"))


async def cmd_hotkeys(app: CommandHost, arg: str) -> None:
    table = Table(show_header=False, box=None, padding=(0, 2))
    for key, what in HOTKEYS:
        table.add_row(Text(key, style="bold"), what)
    for command in COMMANDS:
        table.add_row(Text(f"/{command.name}", style="bold"), command.summary)
    await app.show(table)


async def cmd_quit(app: CommandHost, arg: str) -> None:
    app.quit()


COMMANDS: list[Command] = [
    Command("model", "choose the model (optionally: a search)", cmd_model),
    Command("thinking", "set the thinking level", cmd_thinking),
    Command("compact", "summarise older messages to free context [focus]", cmd_compact),
    Command("new", "start a new session", cmd_new),
    Command("resume", "continue another session of this directory", cmd_resume),
    Command("fork", "branch into a new session from an earlier message", cmd_fork),
    Command("tree", "browse the session tree and continue from any entry", cmd_tree),
    Command("name", "name the session", cmd_name),
    Command("export", "write the session as HTML [path]", cmd_export),
    Command("session", "session file, messages, tokens and cost", cmd_session),
    Command("copy", "copy the last answer to the clipboard", cmd_copy),
    Command("hotkeys", "keys and commands", cmd_hotkeys),
    Command(
        "settings",
        "auto-compact, queue modes, thinking level, default model (saved)",
        settings_commands.cmd_settings,
    ),
    Command(
        "scoped-models",
        "choose the models Ctrl+P cycles (saved as enabledModels)",
        settings_commands.cmd_scoped_models,
    ),
    Command(
        "reload",
        "read models.json, settings, context files, prompt templates and skills again",
        settings_commands.cmd_reload,
    ),
    Command("clone", "duplicate the session as it is now into a new session", session_copies.cmd_clone),
    Command("import", "continue a session file from elsewhere <path.jsonl>", session_copies.cmd_import),
    Command("changelog", "what's new in tempi", notes_commands.cmd_changelog),
    Command(
        "login",
        "log in to Claude Pro/Max, GitHub Copilot or ChatGPT (shared with pi)",
        login_commands.cmd_login,
    ),
    Command("logout", "remove a provider's login or key from auth.json", login_commands.cmd_logout),
    Command("share", "(pi) why there is no gist upload; /export instead", notes_commands.cmd_share),
    Command("quit", "leave (the session is kept; tempi --continue reopens it)", cmd_quit),
    Command("exit", "same as /quit", cmd_quit),
]
BY_NAME = {c.name: c for c in COMMANDS}


def completions() -> list[tuple[str, str]]:
    return [(c.name, c.summary) for c in COMMANDS]


def find_command(text: str) -> tuple[Command, str] | None:
    """The command a `/name args` line names (a unique prefix is enough), and its argument."""
    name, _, arg = text[1:].partition(" ")
    command = BY_NAME.get(name)
    if command is None:
        matches = [c for c in COMMANDS if c.name.startswith(name)] if name else []
        if len(matches) != 1:
            return None
        command = matches[0]
    return command, arg.strip()


def command_for(
    text: str, templates: Sequence[PromptTemplate], skills: Sequence[Skill]
) -> tuple[Command, str] | None:
    """find_command, except that a prompt template or skill of exactly the typed name wins
    over a command whose name the word only begins (`/sess` the template, not /session)."""
    name = text[1:].partition(" ")[0]
    if name not in BY_NAME and names_a_resource(text, templates, skills):
        return None
    return find_command(text)
