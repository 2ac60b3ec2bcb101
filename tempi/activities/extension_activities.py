"""The extensions' activities: load them when a session starts (what they registered
crosses history, never their code), run before_agent_start, call a tool one registered. The
tool_call and tool_result hooks run inside whichever activity runs the tool (`hooked`)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from pathlib import Path
from typing import Any

from temporalio import activity

from tempi.activities.heartbeat import Heartbeater
from tempi.activities.parked_results import find_parked, for_history, park_result
from tempi.activities.sandbox import SandboxError
from tempi.activities.sandbox_policy import refusal
from tempi.activities.spans import traced_tool_call
from tempi.activities.tool_runs import WORKER_STOPPED_TOOL_TEXT, make_backend
from tempi.agent.messages import ToolResultMessage
from tempi.agent.session_entries import SessionEntry
from tempi.agent.session_tree import UnknownEntryError, entry_message
from tempi.agent.tool_specs import ToolOutcome
from tempi.extensions.api import ExtensionContext
from tempi.extensions.hooks import (
    BeforeAgentStartEvent,
    blocked_outcome,
    context_for,
    hooked,
    run_before_agent_start,
    run_registered_tool,
    run_session_start,
)
from tempi.extensions.loader import load_all
from tempi.extensions.models import (
    ExtensionCommand,
    ExtensionEffects,
    ExtensionProblem,
    ExtensionSetup,
    ExtensionTool,
)
from tempi.extensions.run_events import AgentEndEvent, TurnEvent, run_events, turn_end_of
from tempi.store.live_channel import LiveWriter
from tempi.store.session_store import SessionStore
from tempi.store.sidecar import live_path
from tempi.workflows import activity_names as names
from tempi.workflows.activity_payloads import (
    AgentEndInput,
    AgentEndResult,
    AgentStartInput,
    AgentStartResult,
    ExtensionCallInput,
    ExtensionSetupInput,
    SessionFileRef,
    ToolCallResult,
)
from tempi.workflows.session.texts import synthetic_result


def setup_of(paths: list[str]) -> ExtensionSetup:
    """What the extensions registered; the first of two tools with one name wins."""
    loaded, problems = load_all(paths)
    setup = ExtensionSetup(problems=problems, events=sorted({e for ext in loaded for e in ext.handlers}))
    for ext in loaded:
        for tool in ext.tools.values():
            if setup.find(tool.name) is not None:
                setup.problems.append(
                    ExtensionProblem(
                        extension=ext.path, error=f"tool {tool.name!r} is registered by an earlier extension"
                    )
                )
                continue
            setup.tools.append(
                ExtensionTool(
                    name=tool.name,
                    description=tool.description,
                    parameters=tool.parameters,
                    declared_effect=tool.effect,
                    extension=ext.path,
                )
            )
        setup.commands += [
            ExtensionCommand(name=c.name, description=c.description, extension=ext.path)
            for c in ext.commands.values()
        ]
    return setup


async def _tool_context(ref: SessionFileRef) -> ExtensionContext:
    """The context an extension's tool gets: the session's directory, and its sandbox where
    this worker reaches it (the tool's call goes to the sandbox's host)."""
    ctx = context_for(ref)
    try:
        backend, workdir = await make_backend(ref)
    except SandboxError:
        return replace(ctx, sandbox=ref.sandbox)
    return replace(ctx, sandbox=ref.sandbox, backend=backend, workdir=workdir)


class ExtensionActivities:
    def __init__(self, store: SessionStore) -> None:
        self.store = store

    def all(self) -> list[Any]:
        return [self.load_extensions, self.before_agent_start, self.call_extension_tool, self.agent_end]

    @activity.defn(name=names.EXTENSIONS_AGENT_END)
    async def agent_end(self, inp: AgentEndInput) -> AgentEndResult:
        """The run's last turn_end and its agent_end, once the run's entries are written."""
        path: list[SessionEntry] = []
        if inp.leaf_id is not None:
            with contextlib.suppress(UnknownEntryError):
                path = self.store.load(Path(inp.file.session_path)).tree.path_to(inp.leaf_id)
        ids = [e.id for e in path]
        start = ids.index(inp.run_entry_id) if inp.run_entry_id in ids else len(ids)
        messages = [m.to_json_dict() for e in path[start:] if (m := entry_message(e)) is not None]
        events: list[TurnEvent | AgentEndEvent] = []
        if inp.last_turn >= 0 and (ended := turn_end_of(messages, inp.last_turn)) is not None:
            events.append(ended)
        events.append(AgentEndEvent(messages))
        problems, effects = await run_events(inp.extensions, context_for(inp.file), events)
        return AgentEndResult(problems=problems, effects=None if effects.empty() else effects)

    @activity.defn(name=names.LOAD_EXTENSIONS)
    async def load_extensions(self, inp: ExtensionSetupInput) -> ExtensionSetup:
        setup = setup_of(inp.extensions)
        if inp.file is not None:
            failed = {p.extension for p in setup.problems}
            extensions, _ = load_all([p for p in inp.extensions if p not in failed])
            problems, effects = await run_session_start(extensions, context_for(inp.file))
            setup.start_problems = problems
            setup.effects = None if effects.empty() else effects
        return setup

    @activity.defn(name=names.EXTENSIONS_BEFORE_AGENT_START)
    async def before_agent_start(self, inp: AgentStartInput) -> AgentStartResult:
        extensions, problems = load_all(inp.extensions)
        change = await run_before_agent_start(
            extensions, BeforeAgentStartEvent(inp.prompt, inp.system_prompt), context_for(inp.file)
        )
        return AgentStartResult(
            system_prompt=change.system_prompt,
            problems=[*problems, *change.problems],
            effects=None if change.effects.empty() else change.effects,
            messages=change.messages,
        )

    @activity.defn(name=names.CALL_EXTENSION_TOOL)
    async def call_extension_tool(self, inp: ExtensionCallInput) -> ToolCallResult:
        return await traced_tool_call(inp.tool_call.name, self._call_extension_tool(inp))

    async def _call_extension_tool(self, inp: ExtensionCallInput) -> ToolCallResult:
        parked = find_parked(inp.file, inp.entry_id)
        if parked is not None:
            return ToolCallResult(message=for_history(ToolResultMessage.model_validate(parked["message"])))
        call = inp.tool_call
        if (refused := refusal(inp.file.sandbox)) is not None:
            return ToolCallResult(message=synthetic_result(call, refused, inp.timestamp_ms))
        ctx = await _tool_context(inp.file)
        live = LiveWriter(
            live_path(inp.file.session_path, inp.file.session_id, call.id), activity.info().attempt
        )

        def update(partial: Any) -> None:
            text = partial if isinstance(partial, str) else str(partial)
            live.write({"partialResult": {"content": [{"type": "text", "text": text}]}})

        async def run(args: dict[str, Any]) -> ToolOutcome:
            extensions, problems = load_all([inp.tool.extension])
            if problems:
                return blocked_outcome(f"The tool {call.name} cannot run on this worker: {problems[0].error}")
            done = await run_registered_tool(extensions, call.name, args, update, ctx)
            return ToolOutcome.model_validate(
                {"content": done.content, "details": done.details, "is_error": done.is_error}
            )

        task = asyncio.create_task(hooked(inp.extensions, ctx, call, run))
        try:
            async with Heartbeater():
                outcome, effects = await asyncio.shield(task)
        except asyncio.CancelledError:
            task.cancel()
            stopped = WORKER_STOPPED_TOOL_TEXT if activity.is_worker_shutdown() else "Aborted by the user."
            outcome, effects = blocked_outcome(stopped), ExtensionEffects()
        finally:
            live.close()
        return park_result(
            inp,
            ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=outcome.content,
                details=outcome.details if outcome.details is not None else {},
                is_error=outcome.is_error,
                timestamp=inp.timestamp_ms,
            ),
            effects,
        )
