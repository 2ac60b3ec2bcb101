"""SubagentWorkflow: a child session that works on one task (from the `task` tool) and
returns its final answer."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from tempi.workflows.activity_payloads import SubagentInput, SubagentResult
    from tempi.workflows.session.subagent_runner import SUBAGENT_WORKFLOW
    from tempi.workflows.session_types import CarriedState, PromptRequest, SessionInput
    from tempi.workflows.session_workflow import AgentSessionWorkflow


@workflow.defn(name=SUBAGENT_WORKFLOW)
class SubagentWorkflow(AgentSessionWorkflow):
    @workflow.init
    def __init__(self, inp: SubagentInput) -> None:
        super().__init__(inp.session)
        self.task = inp.task

    def _next_run_input(self, carried: CarriedState) -> Any:
        return SubagentInput(session=SessionInput(config=self.config, carried=carried), task=self.task)

    @workflow.run
    async def run(self, inp: SubagentInput) -> SubagentResult:  # type: ignore[override]
        handed_off = self.state.handoff is not None
        await self.loop.run([] if handed_off else [self._user_message(PromptRequest(message=inp.task))])
        await self.entries.flush()
        patch = await self.sandbox.finish(want_patch=True)
        last = self.loop.last_message
        return SubagentResult(
            text=last.text() if last else "",
            stop_reason=last.stop_reason if last else "error",
            error_message=last.error_message if last else "the subagent produced no answer",
            usage=self.state.stats.usage,
            session_file=self.config.session_path,
            patch=patch,
        )
