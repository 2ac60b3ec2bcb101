"""The object an extension's factory receives (`def extension(tempi): ...`): it subscribes
handlers to a session's events and registers tools and commands. One is made per loaded
module, on the worker (or the terminal) that loads it."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, get_args

from pydantic import BaseModel

from tempi.extensions.models import CustomEntry, DeclaredEffect, ExtensionEffects, ExtensionMessage

# pi's events that tempi delivers; a handler for another name is refused when it is added,
# so a typo is not a hook that silently never runs.
EVENTS = (
    "session_start",
    "input",
    "before_agent_start",
    "agent_start",
    "context",
    "tool_call",
    "tool_result",
    "session_before_compact",
    "turn_start",
    "turn_end",
    "agent_end",
)
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_COMMAND_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_:-]*$")

Handler = Callable[[Any, "ExtensionContext"], Any]
Update = Callable[[Any], None]
Execute = Callable[[Any, Update], Awaitable[Any]]


class ExtensionError(Exception):
    """An extension used the API wrongly; the message says what to change."""


class SessionBackend(Protocol):
    """Where the session's tools act (activities/tools/backend.py's ExecutionBackend): this
    machine, a bubblewrap sandbox, or the session's container."""

    async def read_bytes(self, path: str) -> bytes: ...

    async def exec(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        on_output: Callable[[bytes], None],
        timeout: float | None = None,
    ) -> Any: ...

    def shell_argv(self, command: str) -> list[str]: ...


@dataclass(frozen=True)
class CommandRun:
    exit_code: int | None  # None when the command was killed (its timeout)
    output: str  # stdout and stderr, interleaved


@dataclass(frozen=True)
class ExtensionContext:
    """The session a hook or tool runs for. `cwd` is the session's directory (the worker's own
    is another project's, or none): a tool reads and runs through `read_text` and `run`, which
    act where the session's builtin tools do, in its sandbox (`sandbox`) at `workdir`."""

    cwd: str
    session_id: str
    session_file: str
    sandbox: str = "local"
    backend: SessionBackend | None = field(default=None, repr=False, compare=False)
    workdir: str | None = None  # the cwd as the backend sees it (/workspace in a container)

    def path(self, path: str) -> str:
        """`path` as the session's tools resolve it: relative to the session's directory."""
        if path.startswith("/"):
            return path
        return f"{(self.workdir or self.cwd).rstrip('/')}/{path}"

    async def read_text(self, path: str) -> str:
        """A file of the session's workspace, read in its sandbox."""
        if self.backend is None:
            return Path(self.path(path)).read_text(encoding="utf-8")
        return (await self.backend.read_bytes(self.path(path))).decode("utf-8", errors="replace")

    async def run(self, command: str, timeout: float | None = 120) -> CommandRun:
        """A shell command in the session's sandbox and directory, as its bash tool runs one."""
        if self.backend is None:
            raise ExtensionError(
                "ctx.run needs the session's sandbox, which this call cannot reach: it works in a "
                "tool's execute, on a worker that serves the sandbox"
            )
        chunks: list[bytes] = []
        done = await self.backend.exec(
            self.backend.shell_argv(command),
            cwd=self.workdir or self.cwd,
            on_output=chunks.append,
            timeout=timeout,
        )
        return CommandRun(done.exit_code, b"".join(chunks).decode("utf-8", errors="replace"))

    def entries(self, custom_type: str | None = None) -> list[CustomEntry]:
        """The session's `custom` entries (of `custom_type`, if given) in file order: what
        extensions appended in earlier turns, whichever worker ran them."""
        try:
            lines = Path(self.session_file).read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        found = []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line being written
            if entry.get("type") == "custom" and custom_type in (None, entry.get("customType")):
                found.append(CustomEntry(custom_type=entry.get("customType", ""), data=entry.get("data")))
        return found


NotifyType = Literal["info", "warning", "error"]


@dataclass(frozen=True)
class Notice:
    message: str
    notify_type: NotifyType = "info"


@dataclass
class CommandUI:
    """What a slash command may show the user: in the interactive mode a notice, over RPC
    pi's fire-and-forget `extension_ui_request` (method `notify`), in print mode a line on
    stderr."""

    notices: list[Notice] = field(default_factory=list)

    def notify(self, message: str, notify_type: NotifyType = "info") -> None:
        if notify_type not in get_args(NotifyType):
            raise ExtensionError(
                f"notify: notify_type must be one of {', '.join(get_args(NotifyType))}, not {notify_type!r}"
            )
        self.notices.append(Notice(str(message), notify_type))


@dataclass(frozen=True)
class CommandContext(ExtensionContext):
    """The session a slash command runs for, in the front end the user typed it in.
    `has_ui` is False in print mode, where nobody answers; `tempi.send_message` queues a
    message into the session from here as from a hook."""

    has_ui: bool = False
    ui: CommandUI = field(default_factory=CommandUI)


@dataclass
class CallScope:
    """The session call extension code runs in, and what it asked of the session."""

    ctx: ExtensionContext
    effects: ExtensionEffects = field(default_factory=ExtensionEffects)


_scope: ContextVar[CallScope | None] = ContextVar("tempi_extension_scope", default=None)


@contextlib.contextmanager
def call_scope(ctx: ExtensionContext) -> Iterator[CallScope]:
    scope = CallScope(ctx)
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)


def _current(what: str) -> CallScope:
    scope = _scope.get()
    if scope is None:
        raise ExtensionError(f"{what} works inside an event handler or a tool's execute, not when loading")
    return scope


@dataclass(frozen=True)
class RegisteredTool:
    name: str
    description: str
    parameters: dict[str, Any]
    execute: Execute
    effect: DeclaredEffect
    # When the parameters were given as a pydantic model, execute receives an instance.
    model: type[BaseModel] | None = None


@dataclass(frozen=True)
class RegisteredCommand:
    name: str
    description: str
    handler: Callable[..., Any] | None


@dataclass
class ExtensionAPI:
    path: str
    handlers: dict[str, list[Handler]] = field(default_factory=dict)
    tools: dict[str, RegisteredTool] = field(default_factory=dict)
    commands: dict[str, RegisteredCommand] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1].removesuffix(".py")

    def on(self, event: str, handler: Handler) -> None:
        if event not in EVENTS:
            raise ExtensionError(f"tempi has no event {event!r} for extensions; it has {', '.join(EVENTS)}")
        if not callable(handler):
            raise ExtensionError(f"the handler for {event!r} must be a function (event, ctx)")
        self.handlers.setdefault(event, []).append(handler)

    def register_tool(
        self,
        name: str,
        description: str,
        parameters: dict[str, Any] | type[BaseModel],
        execute: Execute,
        effect: DeclaredEffect = "execute",
    ) -> None:
        """A tool the model can call. `execute(args, update)` is async; `update(text)` shows
        progress. `effect` says whether a call may be repeated after a lost worker: "read"
        and "idempotent" may, "write" and "execute" run at most once."""
        if not _TOOL_NAME.match(name):
            raise ExtensionError(
                f"tool name {name!r} may hold only letters, digits, '_' and '-' (at most 64)"
            )
        if effect not in get_args(DeclaredEffect):
            raise ExtensionError(
                f"tool {name!r}: effect {effect!r} is not one of {', '.join(get_args(DeclaredEffect))}"
            )
        if not callable(execute):
            raise ExtensionError(f"tool {name!r}: execute must be an async function (args, update)")
        model: type[BaseModel] | None = None
        if isinstance(parameters, type) and issubclass(parameters, BaseModel):
            model, schema = parameters, parameters.model_json_schema()
        elif isinstance(parameters, dict):
            schema = parameters
        else:
            raise ExtensionError(
                f"tool {name!r}: parameters must be a JSON schema (dict) or a pydantic model"
            )
        if name in self.tools:
            raise ExtensionError(f"tool {name!r} is registered twice")
        self.tools[name] = RegisteredTool(name, description, schema, execute, effect, model)

    def append_entry(self, custom_type: str, data: Any = None) -> None:
        """Keep `data` (JSON) in the session file as pi's `custom` entry; read it back with
        `entries` in a later turn, on any worker."""
        scope = _current("append_entry")
        try:
            json.dumps(data)
        except (TypeError, ValueError) as err:
            raise ExtensionError(f"append_entry({custom_type!r}): data must be JSON ({err})") from None
        scope.effects.custom_entries.append(CustomEntry(custom_type=custom_type, data=data))

    def entries(self, custom_type: str | None = None) -> list[CustomEntry]:
        return _current("entries").ctx.entries(custom_type)

    def send_message(self, text: str, deliver_as: str = "steer") -> None:
        """A user message into the session: `steer` is read before the next model call,
        `follow_up` when the run would stop."""
        if deliver_as not in ("steer", "follow_up"):
            raise ExtensionError(
                f"send_message: deliver_as must be 'steer' or 'follow_up', not {deliver_as!r}"
            )
        scope = _current("send_message")
        scope.effects.messages.append(ExtensionMessage(text=text, deliver_as=deliver_as))  # type: ignore[arg-type]

    def register_command(
        self, name: str, description: str = "", handler: Callable[..., Any] | None = None
    ) -> None:
        if not _COMMAND_NAME.match(name):
            raise ExtensionError(f"command name {name!r}: use letters, digits, '_', ':' and '-'")
        self.commands[name] = RegisteredCommand(name, description, handler)
