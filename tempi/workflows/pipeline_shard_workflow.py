"""PipelineShardWorkflow: one shard of a pipeline, a coding session in the shard's own
worktree. The spec's steps go to the session in order, then the verify command runs; on a
failure the repair prompt continues the same session with the output's tail. The result
names the shard's patch file; the pipeline integrates it."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from tempi.agent.messages import ToolCall, ToolResultMessage
    from tempi.pipeline import run_types as names
    from tempi.pipeline.plan import shard_values
    from tempi.pipeline.prompts import render
    from tempi.pipeline.run_types import (
        ACTIVITY_HEARTBEAT,
        CommandOutcome,
        PatchInput,
        ShardInput,
        ShardProgressSignal,
        ShardResult,
        ShardState,
        VerifyInput,
    )
    from tempi.workflows.session_types import CarriedState, PromptRequest, SessionInput
    from tempi.workflows.session_workflow import AgentSessionWorkflow

SHARD_ACTIVITY_RETRY = RetryPolicy(maximum_attempts=5, initial_interval=timedelta(seconds=1))


@workflow.defn(name=names.SHARD_WORKFLOW)
class PipelineShardWorkflow(AgentSessionWorkflow):
    @workflow.init
    def __init__(self, inp: ShardInput) -> None:
        super().__init__(SessionInput(config=inp.session_config, carried=inp.carried))
        self.inp = inp
        self.next_step = inp.next_step
        self.repairs_done = inp.repairs_done
        self.prompt_started_at = inp.step_started_at_turn
        self.turn_limit: int | None = None
        self.limited = False
        port = self.loop.port
        run_tools = port.execute_tools

        async def limited_tools(calls: list[ToolCall]) -> list[ToolResultMessage]:
            # A turn whose tools ran and that would need one more model call stops here once
            # the step's turns are used: the loop ends the run as an abort.
            results = await run_tools(calls)
            if self.turn_limit is not None and self._turns_in_prompt() >= self.turn_limit:
                self.limited = True
                self.control.abort_requested = True
            return results

        port.execute_tools = limited_tools  # type: ignore[method-assign]

    def _next_run_input(self, carried: CarriedState) -> Any:
        return self.inp.model_copy(
            update={
                "carried": carried,
                "next_step": self.next_step,
                "repairs_done": self.repairs_done,
                "step_started_at_turn": self.prompt_started_at,
            }
        )

    def _turns(self) -> int:
        return self.state.stats.assistant_messages

    def _turns_in_prompt(self) -> int:
        return self._turns() - self.prompt_started_at

    def _limit_for(self, step_turns: int | None) -> int | None:
        """Turns the next prompt may take: the step's own limit, within what the shard has left."""
        per_shard = self.inp.spec.budget.max_turns_per_shard
        left = None if per_shard is None else max(per_shard - self._turns(), 0)
        limits = [n for n in (step_turns, left) if n is not None]
        return min(limits) if limits else None

    async def _prompt(self, text: str | None, what: str, step_turns: int | None) -> str | None:
        """Send a prompt (None: go on with the run handed over from the last workflow run);
        returns why the shard fails, or None."""
        self.turn_limit = self._limit_for(step_turns)
        self.limited = False
        if text is not None:
            if self.turn_limit == 0:
                return f"{what}: the shard used its {self.inp.spec.budget.max_turns_per_shard} turns (budget.max_turns_per_shard)"
            self.prompt_started_at = self._turns()
            self.control.abort_requested = False
            await self.loop.run([self._user_message(PromptRequest(message=text))])
        else:
            await self.loop.run([])
        await self.entries.flush()
        if self.limited:
            return (
                f"{what}: stopped after {self._turns_in_prompt()} turns, its limit "
                f"({'max_turns' if self.turn_limit == step_turns else 'budget.max_turns_per_shard'}), "
                "before the model finished"
            )
        last = self.loop.last_message
        if last is None or last.stop_reason in ("error", "aborted"):
            detail = (last.error_message if last else None) or "no answer"
            return f"{what}: the model's run ended with an error: {detail}"
        return None

    async def _tell(self, state: ShardState) -> None:
        parent = workflow.get_external_workflow_handle(self.inp.parent_workflow_id)
        await parent.signal(
            "shard_progress",
            ShardProgressSignal(
                shard_id=self.inp.shard.id, state=state, session_file=self.config.session_path
            ),
        )

    def _result(self, reason: str | None, tail: str | None = None) -> ShardResult:
        return ShardResult(
            state="failed",
            reason=reason,
            verify_tail=tail,
            repairs=self.repairs_done,
            turns=self._turns(),
            usage=self.state.stats.usage,
            session_file=self.config.session_path,
        )

    async def _verify(self) -> CommandOutcome:
        verify = self.inp.spec.verify
        assert verify is not None
        result: CommandOutcome = await workflow.execute_activity(
            names.RUN_VERIFY,
            VerifyInput(cwd=self.config.cwd, command=verify.command, timeout_s=verify.timeout),
            result_type=CommandOutcome,
            start_to_close_timeout=timedelta(seconds=verify.timeout + 60),
            heartbeat_timeout=ACTIVITY_HEARTBEAT,
            retry_policy=SHARD_ACTIVITY_RETRY,
        )
        return result

    @workflow.run
    async def run(self, inp: ShardInput) -> ShardResult:  # type: ignore[override]
        spec = inp.spec
        values = shard_values(spec, inp.shard, inp.shard_count, inp.base_commit)
        resuming = self.state.handoff is not None
        while self.next_step < len(spec.steps):
            step = spec.steps[self.next_step]
            text = None if resuming else render(step.prompt, values)
            resuming = False
            failed = await self._prompt(text, f"step {step.name}", step.max_turns)
            if failed:
                return self._result(failed)
            self.next_step += 1
        if inp.revision == 0:
            await self._tell("stepped")
            return await self._verify_and_save(inp, values, resuming)
        if spec.verify is None:  # "stepped" would say its verify runs
            return await self._verify_and_save(inp, values, resuming)
        # The verify need not wait for the parent to take the news.
        told = asyncio.ensure_future(self._tell("stepped"))
        try:
            return await self._verify_and_save(inp, values, resuming)
        finally:
            await told

    async def _verify_and_save(self, inp: ShardInput, values: dict[str, str], resuming: bool) -> ShardResult:
        """The verify (and repairs), then the shard's patch saved."""
        spec = inp.spec
        if spec.verify is not None:
            repair = spec.verify.repair
            if resuming:  # handed over in the middle of a repair
                failed = await self._prompt(None, f"repair {self.repairs_done}", None)
                if failed:
                    return self._result(failed)
            while True:
                outcome = await self._verify()
                if outcome.passed:
                    break
                code = "timed out" if outcome.exit_code is None else f"exit {outcome.exit_code}"
                if repair is None or self.repairs_done >= repair.attempts:
                    tried = f" after {self.repairs_done} repair(s)" if self.repairs_done else ""
                    return self._result(f"verify failed{tried} ({code}): {outcome.command}", outcome.tail)
                self.repairs_done += 1
                prompt = render(
                    repair.prompt,
                    {
                        **values,
                        "verify.tail": outcome.tail,
                        "verify.command": outcome.command,
                        "verify.exit_code": "" if outcome.exit_code is None else str(outcome.exit_code),
                    },
                )
                failed = await self._prompt(prompt, f"repair {self.repairs_done}", None)
                if failed:
                    return self._result(failed, outcome.tail)
        patch = await self._save_patch(inp)
        return self._result(None).model_copy(update={"state": "verified", "patch_path": patch})

    async def _save_patch(self, inp: ShardInput) -> str:
        save = PatchInput(
            cwd=self.config.cwd,
            base_commit=inp.start_commit or inp.base_commit,
            state_dir=inp.state_dir,
            shard_id=inp.shard.id,
        )
        if inp.revision == 0:
            patch: str = await workflow.execute_activity(
                names.SAVE_SHARD_PATCH,
                save,
                result_type=str,
                start_to_close_timeout=timedelta(minutes=5),
                heartbeat_timeout=ACTIVITY_HEARTBEAT,
                retry_policy=SHARD_ACTIVITY_RETRY,
            )
            return patch
        # On this worker, within the workflow task: no server round trip to schedule it and
        # none to hand the result back (a lost worker's task runs it again; it is idempotent).
        local: str = await workflow.execute_local_activity(
            names.SAVE_SHARD_PATCH,
            save,
            result_type=str,
            start_to_close_timeout=timedelta(minutes=5),
            retry_policy=SHARD_ACTIVITY_RETRY,
        )
        return local
