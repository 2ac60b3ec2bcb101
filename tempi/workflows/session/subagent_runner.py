"""The `task` tool: each task runs as a SubagentWorkflow child with its own session file,
in parallel (bounded) or as a chain that hands each answer to the next task."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from tempi.agent.messages import TextContent, ToolCall, ToolResultMessage
    from tempi.agent.session_entries import iso_timestamp
    from tempi.agent.subagents import (
        BUILTIN_AGENTS,
        PARALLEL_CONCURRENCY,
        TASK_TOOL,
        AgentDefinition,
        SubagentOutcome,
        format_task_result,
        parse_task_args,
    )
    from tempi.workflows.activity_payloads import SubagentInput, SubagentResult
    from tempi.workflows.session.activity_errors import cause
    from tempi.workflows.session.entries import now_ms
    from tempi.workflows.session.event_log import EventLog
    from tempi.workflows.session.run_control import RunControl
    from tempi.workflows.session.texts import synthetic_result
    from tempi.workflows.session.tool_routes import RouteResult, ToolSlot
    from tempi.workflows.session_types import CarriedState, SessionConfig, SessionInput, workflow_id_for

SUBAGENT_WORKFLOW = "SubagentWorkflow"


class SubagentRunner:
    def __init__(
        self, config: SessionConfig, state: CarriedState, log: EventLog, control: RunControl
    ) -> None:
        self.config = config
        self.state = state
        self.log = log
        self.control = control
        self.children: dict[str, workflow.ChildWorkflowHandle[Any, Any]] = {}
        self.child_sessions: dict[str, list[dict[str, str]]] = {}

    def agents(self) -> list[AgentDefinition]:
        named = {a.name for a in self.config.agents}
        return [*self.config.agents, *(a for a in BUILTIN_AGENTS if a.name not in named)]

    def abort_children(self) -> None:
        # Children end their runs themselves, so their files and answers stay whole.
        for child in list(self.children.values()):
            self.control.in_background(child.signal("abort"))

    async def run_task(self, call: ToolCall) -> ToolResultMessage:
        agents = self.agents()
        try:
            args = parse_task_args(call.arguments, agents)
        except ValueError as err:
            return synthetic_result(call, str(err), now_ms())
        by_name = {a.name: a for a in agents}
        items = args.items()
        outcomes: list[SubagentOutcome | None] = [None] * len(items)

        def progress() -> None:
            done = sum(o is not None for o in outcomes)
            self.log.emit(
                {
                    "type": "tool_execution_update",
                    "toolCallId": call.id,
                    "toolName": call.name,
                    "args": call.arguments,
                    "partialResult": {
                        "content": [
                            {"type": "text", "text": f"{done}/{len(items)} subagent task(s) finished"}
                        ],
                        "details": {
                            "mode": args.mode,
                            "children": list(self.child_sessions.get(call.id, [])),
                        },
                    },
                }
            )

        async def run(i: int, previous: str | None) -> SubagentOutcome:
            item = items[i]
            task = item.task.replace("{previous}", previous or "")
            outcome = await self._run_child(call.id, by_name[item.agent], task, progress)
            outcomes[i] = outcome
            progress()
            return outcome

        if args.mode == "chain":
            previous: str | None = None
            for i in range(len(items)):
                result = await run(i, previous)
                if result.stop_reason in ("error", "aborted") or self.control.abort_requested:
                    break
                previous = result.text
        else:
            limit = asyncio.Semaphore(PARALLEL_CONCURRENCY)

            async def bounded(i: int) -> None:
                async with limit:
                    if not self.control.abort_requested:
                        await run(i, None)

            await asyncio.gather(*(bounded(i) for i in range(len(items))))
        finished = [o for o in outcomes if o is not None]
        text, failed = format_task_result(args.mode, finished)
        if len(finished) < len(items):
            failed = True
            text += f"\n\n{len(items) - len(finished)} task(s) did not run."
        return ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=[TextContent(text=text)],
            details={"mode": args.mode, "results": [o.to_json_dict() for o in finished]},
            is_error=failed,
            timestamp=now_ms(),
        )

    async def _run_child(
        self, call_id: str, agent: AgentDefinition, task: str, progress: Callable[[], None]
    ) -> SubagentOutcome:
        child_id = str(workflow.uuid4())
        created = iso_timestamp(now_ms())
        stamp = created.replace(":", "-").replace(".", "-")
        tools = [t for t in (agent.tools or self.config.tools) if t != TASK_TOOL]
        config = self.config.model_copy(
            update={
                "session_id": child_id,
                "session_path": str(
                    PurePosixPath(self.config.session_path).parent / f"{stamp}_{child_id}.jsonl"
                ),
                "model": agent.model or self.state.model,
                "thinking_level": self.state.thinking_level,
                "system_prompt": f"{agent.system_prompt}\n\nWorking directory: {self.config.cwd}",
                "tools": tools,
                "parent_session": self.config.session_path,
                "agents": [],
                "created_at": created,
                "resume_leaf_id": None,
                "existing_file": False,
                # In docker a child works on its own copy and hands back a patch.
                "workspace_copy_from": self.config.cwd if self.config.sandbox == "docker" else None,
            }
        )
        handle = await workflow.start_child_workflow(
            SUBAGENT_WORKFLOW,
            SubagentInput(session=SessionInput(config=config), task=task),
            id=workflow_id_for(child_id),
            task_queue=workflow.info().task_queue,
            result_type=SubagentResult,
            parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
        )
        self.children[child_id] = handle
        self.child_sessions.setdefault(call_id, []).append(
            {"sessionId": child_id, "sessionFile": config.session_path, "agent": agent.name}
        )
        progress()
        try:
            result: SubagentResult = await handle
        except ChildWorkflowError as err:
            result = SubagentResult(
                text="", stop_reason="error", error_message=cause(err), session_file=config.session_path
            )
        finally:
            self.children.pop(child_id, None)
        self.state.stats.usage = self.state.stats.usage.add(result.usage)
        return SubagentOutcome(
            agent=agent.name,
            task=task,
            session_id=child_id,
            session_file=result.session_file,
            text=result.text,
            stop_reason=result.stop_reason,
            error_message=result.error_message,
            usage=result.usage.to_json_dict(),
            patch=result.patch,
        )


class TaskToolRoute:
    """The `task` tool's route: its calls start subagents instead of running a tool."""

    def __init__(self, runner: SubagentRunner) -> None:
        self.runner = runner

    def handles(self, tool_name: str) -> bool:
        return tool_name == TASK_TOOL

    async def prepare(self) -> str | None:
        return None

    async def run(self, call: ToolCall, slot: ToolSlot) -> RouteResult:
        return RouteResult(await self.runner.run_task(call))
