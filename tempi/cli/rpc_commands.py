"""The RPC commands: each takes the server and the command object and returns the
response's data (NO_DATA for none) or raises RpcError with the message to send."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import ValidationError
from temporalio.client import WorkflowUpdateFailedError

from tempi.agent.messages import ImageContent
from tempi.agent.model_spec import THINKING_LEVELS, ModelSpec, ThinkingLevel
from tempi.agent.prompt_templates import expand_prompt_template
from tempi.agent.session_entries import MessageEntry
from tempi.cli.forking import fork_session_file
from tempi.cli.html_export import default_export_path, export_session_html
from tempi.cli.session_open import OpenSession
from tempi.cli.session_view import context_messages, fork_points, load_at_leaf, session_stats, user_text
from tempi.cli.sessions import SessionPlan, resume_session, start_new_session
from tempi.config.api_keys import has_configured_key
from tempi.store.errors import SessionFileError
from tempi.workflows.session_types import (
    BashRequest,
    BashResult,
    CompactRequest,
    CompactResult,
    PromptRequest,
)

if TYPE_CHECKING:
    from tempi.cli.rpc_mode import RpcServer

NO_DATA: Any = object()
# The handler wrote its response itself.
ALREADY_SENT: Any = object()
QUEUE_MODES = ("one-at-a-time", "all")
# Commands that may take long: run beside the others instead of holding up the queue.
BACKGROUND = frozenset({"bash", "compact", "abort", "abort_retry"})
ABORT_WAIT_S = 30.0
NAME_EVENT_WAIT_S = 5.0


class RpcError(Exception):
    """The command failed; the message is the response's `error`."""


Handler = Callable[["RpcServer", dict[str, Any]], Awaitable[Any]]


def _text(command: dict[str, Any], key: str) -> str:
    value = command.get(key)
    if not isinstance(value, str):
        raise RpcError(f'"{key}" must be a string')
    return value


def _images(command: dict[str, Any]) -> list[ImageContent]:
    raw = command.get("images") or []
    if not isinstance(raw, list):
        raise RpcError('"images" must be a list of {type: "image", data, mimeType}')
    try:
        return [ImageContent.model_validate(i) for i in raw]
    except ValidationError as err:
        raise RpcError(f'"images" holds an invalid image: {err.errors()[0]["msg"]}') from err


# --- prompting ---------------------------------------------------------------------


async def prompt(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    behavior = cmd.get("streamingBehavior")
    if behavior not in (None, "steer", "followUp"):
        raise RpcError('"streamingBehavior" must be "steer" or "followUp"')
    message = expand_prompt_template(_text(cmd, "message"), srv.planned.templates)
    request = PromptRequest(message=message, images=_images(cmd), streaming_behavior=behavior)
    # The ack goes out before any event of the run it starts, as in pi.
    async with srv.gate:
        try:
            await srv.handle.execute_update("prompt", request)
        except WorkflowUpdateFailedError as err:
            raise RpcError(str(err.cause)) from err
        srv.respond(cmd.get("id"), "prompt")
    return ALREADY_SENT


async def steer(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    await _queue(srv, cmd, "steer")
    return NO_DATA


async def follow_up(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    await _queue(srv, cmd, "followUp")
    return NO_DATA


async def _queue(srv: RpcServer, cmd: dict[str, Any], behavior: str) -> None:
    message = _text(cmd, "message")
    if cmd.get("images"):
        request = PromptRequest(message=message, images=_images(cmd), streaming_behavior=behavior)  # type: ignore[arg-type]
        await srv.handle.execute_update("prompt", request)
    else:
        await srv.handle.signal("steer" if behavior == "steer" else "follow_up", message)


async def abort(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    """Like pi, answer once the run has stopped."""
    await srv.handle.signal("abort")
    deadline = asyncio.get_running_loop().time() + ABORT_WAIT_S
    while (await srv.state()).is_streaming and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.1)
    return NO_DATA


# --- state and messages ------------------------------------------------------------


async def get_state(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    s = await srv.state()
    data: dict[str, Any] = {
        "model": s.model.to_json_dict(),
        "thinkingLevel": s.thinking_level,
        "isStreaming": s.is_streaming,
        "isCompacting": s.is_compacting,
        "steeringMode": s.steering_mode,
        "followUpMode": s.follow_up_mode,
        "sessionFile": s.session_file,
        "sessionId": s.session_id,
    }
    if s.session_name:
        data["sessionName"] = s.session_name
    data.update(
        autoCompactionEnabled=s.auto_compaction_enabled,
        messageCount=s.message_count,
        pendingMessageCount=s.pending_message_count,
    )
    return data


async def _messages(srv: RpcServer) -> list[dict[str, Any]]:
    s = await srv.state()
    loaded, leaf = await load_at_leaf(srv.store, s.session_file, s.leaf_id)
    return context_messages(loaded, leaf)


async def get_messages(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    return {"messages": await _messages(srv)}


async def get_session_stats(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    s = await srv.state()
    loaded, leaf = await load_at_leaf(srv.store, s.session_file, s.leaf_id)
    return session_stats(context_messages(loaded, leaf), s.model, s.session_file, s.session_id)


async def get_last_assistant_text(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    return {"text": (await srv.state()).last_assistant_text}


async def get_fork_messages(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    s = await srv.state()
    loaded, _ = await load_at_leaf(srv.store, s.session_file, s.leaf_id)
    return {"messages": fork_points(loaded)}


async def get_commands(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    return {
        "commands": [
            {"name": t.name, "description": t.description, "source": "prompt", "path": t.source}
            | ({"argumentHint": t.argument_hint} if t.argument_hint else {})
            for t in srv.planned.templates
        ]
    }


# --- model and thinking ------------------------------------------------------------


def _available(srv: RpcServer) -> list[ModelSpec]:
    registry = srv.planned.registry
    return [m for m in registry.models if has_configured_key(m.provider, registry)]


def _levels_for(model: ModelSpec) -> list[ThinkingLevel]:
    if not model.reasoning:
        return ["off"]
    levels: list[ThinkingLevel] = [lvl for lvl in THINKING_LEVELS if lvl != "xhigh"]
    mapping = model.thinking_level_map or {}
    if mapping.get("xhigh"):
        levels.append("xhigh")
    return [lvl for lvl in levels if lvl == "off" or lvl not in mapping or mapping[lvl] is not None]


async def _set_model(srv: RpcServer, model: ModelSpec) -> ThinkingLevel:
    await srv.handle.signal("set_model", model)
    srv.planned.plan.model = model
    level = (await srv.state()).thinking_level
    allowed = _levels_for(model)
    if level not in allowed:
        level = allowed[-1] if level != "off" else "off"
        await srv.handle.signal("set_thinking_level", level)
    return level


async def get_available_models(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    return {"models": [m.to_json_dict() for m in _available(srv)]}


async def set_model(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    provider, model_id = cmd.get("provider"), cmd.get("modelId")
    found = next((m for m in _available(srv) if m.provider == provider and m.id == model_id), None)
    if found is None:
        raise RpcError(f"Model not found: {provider}/{model_id}")
    await _set_model(srv, found)
    return found.to_json_dict()


async def cycle_model(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    models = _available(srv)
    if len(models) <= 1:
        return None
    current = (await srv.state()).model
    index = next(
        (i for i, m in enumerate(models) if (m.provider, m.id) == (current.provider, current.id)), -1
    )
    chosen = models[(index + 1) % len(models)]
    level = await _set_model(srv, chosen)
    return {"model": chosen.to_json_dict(), "thinkingLevel": level, "isScoped": False}


async def set_thinking_level(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    level = cmd.get("level")
    if level not in THINKING_LEVELS:
        raise RpcError(f"Unknown thinking level {level!r}. Valid levels: {', '.join(THINKING_LEVELS)}")
    allowed = _levels_for((await srv.state()).model)
    # A level the model cannot use becomes the nearest it can, as pi clamps it.
    if level not in allowed:
        level = "off" if allowed == ["off"] else allowed[-1]
    await srv.handle.signal("set_thinking_level", level)
    srv.planned.plan.thinking_level = cast(ThinkingLevel, level)
    return NO_DATA


async def cycle_thinking_level(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    state = await srv.state()
    allowed = _levels_for(state.model)
    if allowed == ["off"]:
        return None
    index = allowed.index(state.thinking_level) if state.thinking_level in allowed else -1
    level = allowed[(index + 1) % len(allowed)]
    await srv.handle.signal("set_thinking_level", level)
    return {"level": level}


async def _queue_mode(srv: RpcServer, cmd: dict[str, Any], signal: str) -> Any:
    mode = cmd.get("mode")
    if mode not in QUEUE_MODES:
        raise RpcError(f'"mode" must be one of {", ".join(QUEUE_MODES)}')
    await srv.handle.signal(signal, mode)
    return NO_DATA


async def set_steering_mode(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    return await _queue_mode(srv, cmd, "set_steering_mode")


async def set_follow_up_mode(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    return await _queue_mode(srv, cmd, "set_follow_up_mode")


# --- compaction, retry, bash --------------------------------------------------------


def _enabled(cmd: dict[str, Any]) -> bool:
    value = cmd.get("enabled")
    if not isinstance(value, bool):
        raise RpcError('"enabled" must be true or false')
    return value


async def compact(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    instructions = cmd.get("customInstructions")
    try:
        result = await srv.handle.execute_update(
            "compact",
            CompactRequest(custom_instructions=instructions if isinstance(instructions, str) else None),
            result_type=CompactResult,
        )
    except WorkflowUpdateFailedError as err:
        raise RpcError(str(err.cause)) from err
    return result.to_json_dict()


async def set_auto_compaction(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    await srv.handle.signal("set_auto_compaction", _enabled(cmd))
    return NO_DATA


async def set_auto_retry(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    await srv.handle.signal("set_auto_retry", _enabled(cmd))
    return NO_DATA


async def abort_retry(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    return await abort(srv, cmd)


async def bash(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    request = BashRequest(command=_text(cmd, "command"))
    result = await srv.handle.execute_update("bash", request, result_type=BashResult)
    data: dict[str, Any] = {
        "output": result.output,
        "exitCode": result.exit_code,
        "cancelled": result.cancelled,
        "truncated": result.truncated,
    }
    if result.full_output_path:
        data["fullOutputPath"] = result.full_output_path
    return data


async def abort_bash(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    await srv.handle.signal("abort_bash")
    return NO_DATA


# --- sessions ------------------------------------------------------------------------


async def set_session_name(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    name = _text(cmd, "name").strip()
    if not name:
        raise RpcError("Session name cannot be empty")
    await srv.handle.signal("set_session_name", name)
    # pi sends session_info_changed before the response.
    await srv.events_until(lambda e: e["type"] == "session_info_changed", NAME_EVENT_WAIT_S)
    return NO_DATA


async def _plan_now(srv: RpcServer) -> SessionPlan:
    state = await srv.state()
    plan = srv.planned.plan
    plan.model, plan.thinking_level = state.model, state.thinking_level
    return plan


async def new_session(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    parent = cmd.get("parentSession")
    plan = await _plan_now(srv)
    handle, config = await start_new_session(
        srv.client, srv.store, plan, parent_session=parent if isinstance(parent, str) else None
    )
    await srv.use_session(OpenSession(handle, config))
    return {"cancelled": False}


async def _continue_file(srv: RpcServer, path: Path) -> None:
    plan = await _plan_now(srv)
    try:
        handle, config = await resume_session(srv.client, srv.store, path, plan, override_model=False)
    except SessionFileError as err:
        raise RpcError(str(err)) from err
    await srv.use_session(OpenSession(handle, config))


async def switch_session(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    path = Path(_text(cmd, "sessionPath")).expanduser()
    if not path.is_file():
        raise RpcError(f"Session file {path} does not exist")
    await _continue_file(srv, path.absolute())
    return {"cancelled": False}


async def fork(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    entry_id = _text(cmd, "entryId")
    s = await srv.state()
    loaded, _ = await load_at_leaf(srv.store, s.session_file, s.leaf_id)
    entry = loaded.tree.get(entry_id) if loaded else None
    if not isinstance(entry, MessageEntry) or entry.message.role != "user":
        raise RpcError(f"Invalid entry ID for forking: {entry_id} is not a user message of this session")
    path = fork_session_file(srv.store, Path(s.session_file), entry.parent_id)
    await _continue_file(srv, path)
    return {"text": user_text(entry.message.to_json_dict()), "cancelled": False}


async def clone(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    s = await srv.state()
    loaded, leaf = await load_at_leaf(srv.store, s.session_file, s.leaf_id)
    if loaded is None or leaf is None:
        raise RpcError("Cannot clone session: no current entry selected")
    path = fork_session_file(srv.store, Path(s.session_file), leaf)
    await _continue_file(srv, path)
    return {"cancelled": False}


async def export_html(srv: RpcServer, cmd: dict[str, Any]) -> Any:
    s = await srv.state()
    await load_at_leaf(srv.store, s.session_file, s.leaf_id)
    source = Path(s.session_file)
    if not source.is_file():
        raise RpcError("Nothing to export yet: the session file is written after the first answer.")
    wanted = cmd.get("outputPath")
    target = (
        Path(wanted).expanduser()
        if isinstance(wanted, str) and wanted
        else srv.cwd / default_export_path(source)
    )
    export_session_html(srv.store, source, target)
    return {"path": str(target)}


HANDLERS: dict[str, Handler] = {
    f.__name__: f
    for f in (
        prompt, steer, follow_up, abort, get_state, get_messages, get_session_stats,
        get_last_assistant_text, get_fork_messages, get_commands, get_available_models,
        set_model, cycle_model, set_thinking_level, cycle_thinking_level, set_steering_mode,
        set_follow_up_mode, compact, set_auto_compaction, set_auto_retry, abort_retry, bash,
        abort_bash, set_session_name, new_session, switch_session, fork, clone, export_html,
    )
}  # fmt: skip
