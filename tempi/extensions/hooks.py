"""Running extensions' handlers and tools, in extension order. Plain async functions over
loaded extensions: the activities call them, the tests can too.

Failures never escape: a `tool_call` handler that raises blocks the call (fail closed, so a
guard that breaks does not wave dangerous calls through); any other handler that raises is
reported and skipped."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from tempi.agent.llm_context import LlmContext
from tempi.agent.messages import TextContent, ToolCall
from tempi.agent.tool_specs import ToolOutcome
from tempi.extensions.api import ExtensionAPI, ExtensionContext, Update, call_scope
from tempi.extensions.loader import describe_failure, load_all
from tempi.extensions.models import ExtensionEffects, ExtensionProblem, InjectedMessage

if TYPE_CHECKING:
    from tempi.workflows.activity_payloads import SessionFileRef

log = logging.getLogger(__name__)


def context_for(ref: SessionFileRef) -> ExtensionContext:
    return ExtensionContext(cwd=ref.cwd, session_id=ref.session_id, session_file=ref.session_path)


@dataclass
class ToolCallEvent:
    tool_name: str
    tool_call_id: str
    input: dict[str, Any]  # a handler may change it in place, or return {"input": {...}}


@dataclass
class ToolResultEvent:
    tool_name: str
    tool_call_id: str
    input: dict[str, Any]
    content: list[dict[str, Any]]  # pi's blocks: {"type": "text", "text": ...} or images
    details: Any
    is_error: bool


@dataclass
class BeforeAgentStartEvent:
    prompt: str
    system_prompt: str


@dataclass
class LifecycleEvent:
    """An event handlers only observe (session_start, agent_start); they may still append
    entries or send messages."""

    type: str


@dataclass
class ContextEvent:
    messages: list[dict[str, Any]]  # pi's messages as sent to the model; change or replace them


@dataclass
class ToolCallDecision:
    input: dict[str, Any]
    blocked: str | None = None  # the reason the model is given


@dataclass
class ToolResultChange:
    content: list[dict[str, Any]]
    details: Any
    is_error: bool
    problems: list[ExtensionProblem] = field(default_factory=list)


@dataclass
class AgentStartChange:
    system_prompt: str
    problems: list[ExtensionProblem] = field(default_factory=list)
    effects: ExtensionEffects = field(default_factory=ExtensionEffects)
    messages: list[InjectedMessage] = field(default_factory=list)


async def call_handler(handler: Any, *args: Any) -> Any:
    result = handler(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


def field_of(result: Any, *keys: str) -> Any:
    """A field of a handler's answer, a dict (pi's camelCase or snake_case) or an object."""
    for key in keys:
        if isinstance(result, dict) and key in result:
            return result[key]
        if not isinstance(result, dict) and hasattr(result, key):
            return getattr(result, key)
    return None


def blocks_of(value: Any) -> list[dict[str, Any]]:
    """Content an extension gave, as pi's blocks: a string is one text block."""
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return [b if isinstance(b, dict) else {"type": "text", "text": str(b)} for b in value]
    return [{"type": "text", "text": str(value)}]


async def run_tool_call(
    extensions: list[ExtensionAPI], event: ToolCallEvent, ctx: ExtensionContext
) -> ToolCallDecision:
    for ext in extensions:
        for handler in ext.handlers.get("tool_call", []):
            try:
                result = await call_handler(handler, event, ctx)
            except Exception as err:
                return ToolCallDecision(
                    event.input,
                    blocked=f"Blocked: extension {ext.name}'s tool_call hook failed: {describe_failure(err)}",
                )
            if result is None:
                continue
            if field_of(result, "block"):
                reason = field_of(result, "reason") or f"Blocked by extension {ext.name}."
                return ToolCallDecision(event.input, blocked=str(reason))
            changed = field_of(result, "input")
            if isinstance(changed, dict):
                event.input = changed
    return ToolCallDecision(event.input)


async def run_tool_result(
    extensions: list[ExtensionAPI], event: ToolResultEvent, ctx: ExtensionContext
) -> ToolResultChange:
    problems: list[ExtensionProblem] = []
    for ext in extensions:
        for handler in ext.handlers.get("tool_result", []):
            try:
                result = await call_handler(handler, event, ctx)
            except Exception as err:
                problems.append(
                    ExtensionProblem(extension=ext.path, error=f"tool_result hook: {describe_failure(err)}")
                )
                continue
            if result is None:
                continue
            if (content := field_of(result, "content")) is not None:
                event.content = blocks_of(content)
            if (details := field_of(result, "details")) is not None:
                event.details = details
            if (is_error := field_of(result, "isError", "is_error")) is not None:
                event.is_error = bool(is_error)
    return ToolResultChange(event.content, event.details, event.is_error, problems)


async def run_before_agent_start(
    extensions: list[ExtensionAPI], event: BeforeAgentStartEvent, ctx: ExtensionContext
) -> AgentStartChange:
    with call_scope(ctx) as scope:
        change = await _before_agent_start(extensions, event, ctx)
        change.problems += await notify(extensions, LifecycleEvent("agent_start"), ctx)
    change.effects = scope.effects
    return change


async def notify(
    extensions: list[ExtensionAPI], event: LifecycleEvent, ctx: ExtensionContext
) -> list[ExtensionProblem]:
    """Run the handlers of an event whose answer changes nothing; failures are reported."""
    problems: list[ExtensionProblem] = []
    for ext in extensions:
        for handler in ext.handlers.get(event.type, []):
            try:
                await call_handler(handler, event, ctx)
            except Exception as err:
                problems.append(
                    ExtensionProblem(extension=ext.path, error=f"{event.type} hook: {describe_failure(err)}")
                )
    return problems


async def run_session_start(
    extensions: list[ExtensionAPI], ctx: ExtensionContext
) -> tuple[list[ExtensionProblem], ExtensionEffects]:
    with call_scope(ctx) as scope:
        problems = await notify(extensions, LifecycleEvent("session_start"), ctx)
    return problems, scope.effects


async def _before_agent_start(
    extensions: list[ExtensionAPI], event: BeforeAgentStartEvent, ctx: ExtensionContext
) -> AgentStartChange:
    change = AgentStartChange(event.system_prompt)
    for ext in extensions:
        for handler in ext.handlers.get("before_agent_start", []):
            try:
                result = await call_handler(handler, event, ctx)
                message = _injected(ext, field_of(result, "message") if result is not None else None)
            except Exception as err:
                change.problems.append(
                    ExtensionProblem(
                        extension=ext.path, error=f"before_agent_start hook: {describe_failure(err)}"
                    )
                )
                continue
            if message is not None:
                change.messages.append(message)
            prompt = field_of(result, "systemPrompt", "system_prompt") if result is not None else None
            if isinstance(prompt, str):
                event.system_prompt = prompt
    change.system_prompt = event.system_prompt
    return change


def _injected(ext: ExtensionAPI, message: Any) -> InjectedMessage | None:
    """pi's `{customType, content, display, details}` (a bare string is its content); a
    malformed one raises, so it is reported like a handler that failed."""
    if message is None:
        return None
    if isinstance(message, str):
        message = {"content": message}
    content = field_of(message, "content")
    if content is None:
        raise ValueError("the message it returned has no content")
    display = field_of(message, "display")
    return InjectedMessage.model_validate(
        {
            "custom_type": field_of(message, "customType", "custom_type") or ext.name,
            "content": content if isinstance(content, str) else blocks_of(content),
            "display": True if display is None else bool(display),
            "details": field_of(message, "details"),
        }
    )


@dataclass
class ToolRun:
    content: list[dict[str, Any]]
    details: Any
    is_error: bool


async def run_registered_tool(
    extensions: list[ExtensionAPI],
    name: str,
    args: dict[str, Any],
    update: Update,
    ctx: ExtensionContext | None = None,
) -> ToolRun:
    """Run an extension's tool; an error it raises is the model's error result. An execute
    that takes a third parameter gets `ctx`, the session's directory and sandbox."""
    tool = next((e.tools[name] for e in extensions if name in e.tools), None)
    if tool is None:
        return ToolRun(
            blocks_of(f"No loaded extension provides the tool {name!r} on this worker."), None, True
        )
    value: Any = args
    if tool.model is not None:
        try:
            value = tool.model.model_validate(args)
        except ValidationError as err:
            return ToolRun(blocks_of(f"Invalid arguments for {name}: {err}"), None, True)
    try:
        extra = (ctx,) if ctx is not None and _takes_context(tool.execute) else ()
        result = await call_handler(tool.execute, value, update, *extra)
    except Exception as err:
        return ToolRun(blocks_of(f"{name} failed: {type(err).__name__}: {err}"), None, True)
    if isinstance(result, BaseModel):
        result = result.model_dump(mode="json")
    if isinstance(result, dict) and "content" in result:
        return ToolRun(
            blocks_of(result["content"]),
            result.get("details"),
            bool(result.get("isError", result.get("is_error", False))),
        )
    return ToolRun(blocks_of("" if result is None else result), None, False)


def _takes_context(execute: Any) -> bool:
    try:
        parameters = inspect.signature(execute).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3 or any(p.kind is p.VAR_POSITIONAL for p in parameters)


async def hooked(
    paths: list[str],
    ctx: ExtensionContext,
    call: ToolCall,
    run: Callable[[dict[str, Any]], Awaitable[ToolOutcome]],
) -> tuple[ToolOutcome, ExtensionEffects]:
    """`run` with the arguments the tool_call hooks leave, its outcome passed through the
    tool_result hooks, and what extension code asked of the session meanwhile. An extension
    this worker cannot load blocks the call: a guard that is missing must not let calls
    through."""
    with call_scope(ctx) as scope:
        return await _hooked(paths, ctx, call, run), scope.effects


async def _hooked(
    paths: list[str],
    ctx: ExtensionContext,
    call: ToolCall,
    run: Callable[[dict[str, Any]], Awaitable[ToolOutcome]],
) -> ToolOutcome:
    if not paths:
        return await run(call.arguments)
    extensions, problems = load_all(paths)
    if problems:
        return blocked_outcome(
            "Blocked: this worker could not load an extension the session uses, so the call was "
            f"not run. {problems[0].error}"
        )
    decision = await run_tool_call(extensions, ToolCallEvent(call.name, call.id, dict(call.arguments)), ctx)
    if decision.blocked is not None:
        return blocked_outcome(decision.blocked)
    outcome = await run(decision.input)
    changed = await run_tool_result(
        extensions,
        ToolResultEvent(
            call.name,
            call.id,
            decision.input,
            [b.to_json_dict() for b in outcome.content],
            outcome.details,
            outcome.is_error,
        ),
        ctx,
    )
    for problem in changed.problems:
        log.warning("extension %s: %s", problem.extension, problem.error)
    return ToolOutcome.model_validate(
        {"content": changed.content, "details": changed.details, "is_error": changed.is_error}
    )


def blocked_outcome(reason: str) -> ToolOutcome:
    return ToolOutcome(content=[TextContent(text=reason)], is_error=True)


async def with_context_hooks(paths: list[str], ctx: ExtensionContext, context: LlmContext) -> LlmContext:
    """The context the model is sent, after the `context` handlers, in extension order. A
    handler that raises, or messages that are not pi's shape, leave the context as it was."""
    extensions, problems = load_all(paths)
    for problem in problems:
        log.warning("extension %s: %s", problem.extension, problem.error)
    messages = context.messages
    for ext in extensions:
        for handler in ext.handlers.get("context", []):
            event = ContextEvent([m.to_json_dict() for m in messages])
            try:
                result = await call_handler(handler, event, ctx)
                changed = field_of(result, "messages") if result is not None else None
                messages = LlmContext.model_validate(
                    {"messages": changed if isinstance(changed, list) else event.messages}
                ).messages
            except Exception as err:
                log.warning("extension %s: context hook: %s", ext.path, describe_failure(err))
    return context.model_copy(update={"messages": messages})
