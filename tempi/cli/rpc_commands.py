"""The RPC command table, and the commands that prompt, report state, pick the model
and run compaction or bash; the session commands live in rpc_sessions."""

from __future__ import annotations

from typing import Any, cast

from pydantic import ValidationError
from temporalio.service import RPCError

from tempi.agent.messages import ImageContent
from tempi.agent.model_spec import THINKING_LEVELS, ModelSpec, ThinkingLevel
from tempi.agent.thinking_levels import DEFAULT_THINKING_LEVEL
from tempi.cli.errors import UserError
from tempi.cli.extension_commands import (
    after_input_handlers,
    command_context,
    deliver_messages,
    input_error_event,
    notify_request,
    outcome_of,
    rpc_command_list,
)
from tempi.cli.rpc_context import ALREADY_SENT, NO_DATA, Handler, RpcContext, RpcError, text_arg
from tempi.cli.rpc_sessions import clone, export_html, fork, new_session, set_session_name, switch_session
from tempi.cli.session_choice import reopen_if_closed
from tempi.cli.slash_input import expand_input
from tempi.client import SessionRefused
from tempi.client.transcript import context_messages, fork_points, load_at_leaf, session_stats
from tempi.config.api_keys import has_configured_key
from tempi.extensions.commands import find_command
from tempi.workflows.session_types import QueueMode

QUEUE_MODES = ("one-at-a-time", "all")
# Commands that may take long: run beside the others instead of holding up the queue.
BACKGROUND = frozenset({"bash", "compact", "abort", "abort_retry"})


def _images(command: dict[str, Any]) -> list[ImageContent]:
    raw = command.get("images") or []
    if not isinstance(raw, list):
        raise RpcError('"images" must be a list of {type: "image", data, mimeType}')
    try:
        return [ImageContent.model_validate(i) for i in raw]
    except ValidationError as err:
        raise RpcError(f'"images" holds an invalid image: {err.errors()[0]["msg"]}') from err


# --- prompting ---------------------------------------------------------------------


async def prompt(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    behavior = cmd.get("streamingBehavior")
    if behavior not in (None, "steer", "followUp"):
        raise RpcError('"streamingBehavior" must be "steer" or "followUp"')
    message = expand_input(text_arg(cmd, "message"), srv.planned.templates, srv.planned.skills)
    paths = srv.planned.options.extensions or []
    if paths and find_command(paths, message) is not None:
        state = await srv.session.state()
        ran = await outcome_of(
            message, paths, command_context(state.session_id, state.session_file, state.cwd, has_ui=True)
        )
    else:
        ran = None
    if ran is not None:
        for notice in ran.notices:
            srv.write_event(notify_request(notice))
        if ran.error is not None:
            raise RpcError(ran.error)
        if ran.prompt is None:
            await deliver_messages(srv.session, ran.messages)
            return NO_DATA
        message = ran.prompt
    elif paths:
        state = await srv.session.state()
        changed, problems = await after_input_handlers(
            message,
            paths,
            command_context(state.session_id, state.session_file, state.cwd, has_ui=True),
            "rpc",
        )
        for problem in problems:
            srv.write_event(input_error_event(problem))
        if changed is None:
            return NO_DATA
        message = changed
    images = _images(cmd)

    async def send() -> None:
        # The ack goes out before any event of the run it starts, as in pi.
        async with srv.gate:
            try:
                await srv.session.prompt(message, images=images, streaming_behavior=behavior)
            except SessionRefused as err:
                raise RpcError(str(err)) from err
            srv.respond(cmd.get("id"), "prompt")

    try:
        await send()
    except RPCError:
        # The session closed after waiting past its idle time: it goes on from its file.
        assert srv.opened is not None
        try:
            reopened = await reopen_if_closed(
                srv.service, srv.opened, srv.planned.options, srv.planned.registry.find
            )
        except UserError as err:
            raise RpcError(str(err)) from err
        if reopened is None:
            raise
        await srv.use_session(reopened)
        await send()
    if ran is not None:
        await deliver_messages(srv.session, ran.messages)
    return ALREADY_SENT


async def steer(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    await srv.session.steer(text_arg(cmd, "message"), images=_images(cmd))
    return NO_DATA


async def follow_up(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    await srv.session.follow_up(text_arg(cmd, "message"), images=_images(cmd))
    return NO_DATA


async def abort(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    """Like pi, answer once the run has stopped."""
    await srv.session.abort(wait=True)
    return NO_DATA


# --- state and messages ------------------------------------------------------------


async def get_state(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    s = await srv.session.state()
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


async def get_messages(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    return {"messages": await srv.session.messages()}


async def get_session_stats(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    s = await srv.session.state()
    loaded, leaf = await load_at_leaf(srv.service.store, s.session_file, s.leaf_id)
    return session_stats(context_messages(loaded, leaf), s.model, s.session_file, s.session_id)


async def get_last_assistant_text(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    return {"text": (await srv.session.state()).last_assistant_text}


async def get_fork_messages(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    s = await srv.session.state()
    loaded, _ = await load_at_leaf(srv.service.store, s.session_file, s.leaf_id)
    return {"messages": fork_points(loaded)}


async def get_commands(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    return {
        "commands": [
            {"name": t.name, "description": t.description, "source": "prompt", "path": t.source}
            | ({"argumentHint": t.argument_hint} if t.argument_hint else {})
            for t in srv.planned.templates
        ]
        + [
            {"name": f"skill:{s.name}", "description": s.description, "source": "skill", "path": s.file_path}
            for s in srv.planned.skills
        ]
        + rpc_command_list(srv.planned.options.extensions or [])
    }


# --- model and thinking ------------------------------------------------------------


def _available(srv: RpcContext) -> list[ModelSpec]:
    registry = srv.planned.registry
    return [m for m in registry.models if has_configured_key(m.provider, registry)]


def _default_level(srv: RpcContext) -> ThinkingLevel:
    return srv.planned.settings.default_thinking_level or DEFAULT_THINKING_LEVEL


async def get_available_models(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    return {"models": [m.to_json_dict() for m in _available(srv)]}


async def set_model(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    provider, model_id = cmd.get("provider"), cmd.get("modelId")
    found = next((m for m in _available(srv) if m.provider == provider and m.id == model_id), None)
    if found is None:
        raise RpcError(f"Model not found: {provider}/{model_id}")
    srv.planned.options.thinking_level = await srv.session.set_model(found, default_level=_default_level(srv))
    srv.planned.options.model = found
    return found.to_json_dict()


async def cycle_model(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    available = _available(srv)
    keyed = {(m.provider, m.id) for m in available}
    scoped = [s for s in srv.planned.scoped if (s.model.provider, s.model.id) in keyed]
    cycled = await srv.session.cycle_model(
        [s.model for s in scoped] if scoped else available, default_level=_default_level(srv)
    )
    if cycled is None:
        return None
    model, level = cycled
    # A --models entry with a :level brings its level along, as in pi.
    wanted = next(
        (s.thinking_level for s in scoped if (s.model.provider, s.model.id) == (model.provider, model.id)),
        None,
    )
    if wanted is not None:
        level = await srv.session.set_thinking_level(wanted)
    srv.planned.options.model, srv.planned.options.thinking_level = model, level
    return {"model": model.to_json_dict(), "thinkingLevel": level, "isScoped": bool(scoped)}


async def set_thinking_level(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    level = cmd.get("level")
    if level not in THINKING_LEVELS:
        raise RpcError(f"Unknown thinking level {level!r}. Valid levels: {', '.join(THINKING_LEVELS)}")
    srv.planned.options.thinking_level = await srv.session.set_thinking_level(cast(ThinkingLevel, level))
    return NO_DATA


async def cycle_thinking_level(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    level = await srv.session.cycle_thinking_level()
    return None if level is None else {"level": level}


def _queue_mode(cmd: dict[str, Any]) -> QueueMode:
    mode = cmd.get("mode")
    if mode not in QUEUE_MODES:
        raise RpcError(f'"mode" must be one of {", ".join(QUEUE_MODES)}')
    return cast(QueueMode, mode)


async def set_steering_mode(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    await srv.session.set_steering_mode(_queue_mode(cmd))
    return NO_DATA


async def set_follow_up_mode(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    await srv.session.set_follow_up_mode(_queue_mode(cmd))
    return NO_DATA


# --- compaction, retry, bash --------------------------------------------------------


def _enabled(cmd: dict[str, Any]) -> bool:
    value = cmd.get("enabled")
    if not isinstance(value, bool):
        raise RpcError('"enabled" must be true or false')
    return value


async def compact(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    instructions = cmd.get("customInstructions")
    result = await srv.session.compact(instructions if isinstance(instructions, str) else None)
    return result.to_json_dict()


async def set_auto_compaction(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    await srv.session.set_auto_compaction(_enabled(cmd))
    return NO_DATA


async def set_auto_retry(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    await srv.session.set_auto_retry(_enabled(cmd))
    return NO_DATA


async def abort_retry(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    return await abort(srv, cmd)


async def bash(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    result = await srv.session.bash(text_arg(cmd, "command"))
    data: dict[str, Any] = {
        "output": result.output,
        "exitCode": result.exit_code,
        "cancelled": result.cancelled,
        "truncated": result.truncated,
    }
    if result.full_output_path:
        data["fullOutputPath"] = result.full_output_path
    return data


async def abort_bash(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    await srv.session.abort_bash()
    return NO_DATA


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
