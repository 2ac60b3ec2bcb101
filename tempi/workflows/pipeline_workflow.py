"""PipelineWorkflow: a refactor run shard by shard over a repository.

Its id is the pipeline's (name, spec hash, base commit), so the same command run again
finds this run. It prepares the output branch and reads the shards already committed there
(by their trailers, so even a run whose Temporal state is gone skips them), runs the setup
once, then runs the other shards as PipelineShardWorkflow children in a sliding window and
commits each verified shard's patch on the output branch, in shard order."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from tempi.agent.session_entries import iso_timestamp
    from tempi.pipeline import run_types as names
    from tempi.pipeline.run_types import (
        ACTIVITY_HEARTBEAT,
        SHARD_CWD_MARK,
        CommandOutcome,
        IntegrateInput,
        IntegrateResult,
        OutputInput,
        OutputReady,
        PipelineInput,
        PipelineProgress,
        ReleaseInput,
        SetupInput,
        ShardInput,
        ShardPrepareInput,
        ShardProgressSignal,
        ShardResult,
        ShardStatus,
        VerifyInput,
    )
    from tempi.workflows.session.activity_errors import cause
    from tempi.workflows.session.entries import now_ms

GIT_RETRY = RetryPolicy(maximum_attempts=5, initial_interval=timedelta(seconds=1))
GIT_TIMEOUT = timedelta(minutes=10)
# Histories from before a conflicting shard ran again marked it `conflict` at once.
RERUN_ON_CONFLICT = "pipeline-rerun-on-conflict"
SETUP_RETRY = RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=1))


@workflow.defn(name=names.PIPELINE_WORKFLOW)
class PipelineWorkflow:
    @workflow.init
    def __init__(self, inp: PipelineInput) -> None:
        self.inp = inp
        self.progress = PipelineProgress(
            pipeline_id=inp.pipeline_id,
            name=inp.spec.name,
            branch=inp.spec.branch,
            base_commit=inp.base_commit,
            shards=[ShardStatus(shard=s) for s in inp.shards],
            spent_before_usd=inp.spent_before_usd,
        )
        self.by_id = {s.shard.id: s for s in self.progress.shards}
        self.stop_new = False
        self.started = workflow.now()  # budget.deadline counts from this run's start
        self.running: dict[str, asyncio.Task[ShardResult]] = {}

    @workflow.query
    def get_progress(self) -> PipelineProgress:
        return self.progress

    @workflow.signal
    def shard_progress(self, sig: ShardProgressSignal) -> None:
        status = self.by_id.get(sig.shard_id)
        if status is not None and status.state == "running":
            status.state = sig.state
            status.session_file = sig.session_file

    @workflow.signal
    def cancel(self) -> None:
        """No new shard starts; the running ones are cancelled; the committed ones stay."""
        self.progress.cancelled = True
        self.stop_new = True
        for task in self.running.values():
            task.cancel()

    def _budget_stop(self) -> str | None:
        """The budget key the run has reached, so no new shard starts; None while within it."""
        budget = self.inp.spec.budget
        if budget.max_cost_usd is not None and self.progress.cost_usd() >= budget.max_cost_usd:
            return "budget.max_cost_usd"
        elapsed = workflow.now() - self.started
        if budget.deadline is not None and elapsed >= timedelta(seconds=budget.deadline):
            return "budget.deadline"
        return None

    def _may_start(self) -> bool:
        """Whether a shard may start now (or run again); once a budget is reached, none may."""
        if not self.stop_new:
            self.progress.stopped_by = self._budget_stop()
            self.stop_new = self.progress.stopped_by is not None
        return not self.stop_new

    @workflow.run
    async def run(self, inp: PipelineInput) -> PipelineProgress:
        ready: OutputReady = await workflow.execute_activity(
            names.PREPARE_OUTPUT,
            OutputInput(
                repo_root=inp.repo_root,
                base_commit=inp.base_commit,
                branch=inp.spec.branch,
                state_dir=inp.state_dir,
                pipeline_id=inp.pipeline_id,
            ),
            result_type=OutputReady,
            start_to_close_timeout=GIT_TIMEOUT,
            heartbeat_timeout=ACTIVITY_HEARTBEAT,
            retry_policy=GIT_RETRY,
        )
        for status in self.progress.shards:
            commit = ready.committed.get(status.shard.id)
            if commit:
                status.state, status.commit, status.resumed = "committed", commit, True
        todo = [s for s in self.progress.shards if s.state == "pending"]
        if inp.spec.setup and todo and not self.progress.cancelled:
            failed: CommandOutcome | None = await workflow.execute_activity(
                names.RUN_SETUP,
                SetupInput(
                    worktree=ready.worktree,
                    base_commit=inp.base_commit,
                    state_dir=inp.state_dir,
                    commands=inp.spec.setup,
                ),
                result_type=CommandOutcome,
                start_to_close_timeout=timedelta(hours=2),
                heartbeat_timeout=ACTIVITY_HEARTBEAT,
                # A failing command is an outcome, not an error: a retry is for a lost worker,
                # and the commands run again from the start (the marker is written after all).
                retry_policy=SETUP_RETRY,
            )
            if failed is not None:
                code = "timed out" if failed.exit_code is None else f"exit {failed.exit_code}"
                for status in todo:
                    status.state, status.reason = "failed", f"setup failed ({code}): {failed.command}"
                    status.verify_tail = failed.tail
                self.progress.phase = "done"
                return self.progress
        self.progress.phase = "shards"
        await self._run_shards(todo, ready.worktree)
        await self._final(ready.worktree)
        await workflow.execute_activity(
            names.RELEASE_WORKTREES,
            ReleaseInput(
                repo_root=inp.repo_root,
                state_dir=inp.state_dir,
                committed_shards=[s.shard.id for s in self.progress.shards if s.state == "committed"],
            ),
            start_to_close_timeout=GIT_TIMEOUT,
            heartbeat_timeout=ACTIVITY_HEARTBEAT,
            retry_policy=GIT_RETRY,
        )
        self.progress.phase = "done"
        return self.progress

    async def _run_shards(self, todo: list[ShardStatus], output: str) -> None:
        window = asyncio.Semaphore(self.inp.concurrency)
        results: dict[str, ShardResult | None] = {}
        next_up = 0
        integrating = asyncio.Lock()

        async def integrate_in_order() -> None:
            nonlocal next_up
            async with integrating:
                while next_up < len(todo) and todo[next_up].shard.id in results:
                    status = todo[next_up]
                    result = results[status.shard.id]
                    if result is not None and result.state == "verified" and result.patch_path:
                        await self._commit_or_rerun(status, result, output)
                    next_up += 1

        async def one(status: ShardStatus) -> None:
            async with window:
                result = None
                if self._may_start():
                    result = await self._shard(status)
                    if (
                        result is not None
                        and result.state == "failed"
                        and self.inp.spec.on_shard_failure == "stop"
                    ):
                        self.stop_new = True
                results[status.shard.id] = result
            await integrate_in_order()

        await asyncio.gather(*(one(s) for s in todo))

    async def _shard(self, status: ShardStatus, start_commit: str | None = None) -> ShardResult | None:
        """Run one shard's child session (at the base commit, or at `start_commit` of the output
        branch when it runs again after a conflict); None when the pipeline was cancelled first."""
        inp = self.inp
        shard = status.shard
        status.state = "running"
        worktree: str = await workflow.execute_activity(
            names.PREPARE_SHARD,
            ShardPrepareInput(
                repo_root=inp.repo_root,
                base_commit=start_commit or inp.base_commit,
                state_dir=inp.state_dir,
                shard_id=shard.id,
            ),
            result_type=str,
            start_to_close_timeout=GIT_TIMEOUT,
            heartbeat_timeout=ACTIVITY_HEARTBEAT,
            retry_policy=GIT_RETRY,
        )
        session_id = str(workflow.uuid4())
        created = iso_timestamp(now_ms())
        stamp = created.replace(":", "-").replace(".", "-")
        template = inp.session
        config = template.model_copy(
            update={
                "session_id": session_id,
                "session_path": f"{inp.state_dir}/shards/{shard.id}/{stamp}_{session_id}.jsonl",
                "cwd": worktree,
                "system_prompt": template.system_prompt.replace(SHARD_CWD_MARK, worktree),
                "created_at": created,
            }
        )
        status.session_file = config.session_path
        child = ShardInput(
            session_config=config,
            shard=shard,
            pipeline_id=inp.pipeline_id,
            spec=inp.spec,
            shard_count=len(inp.shards),
            base_commit=inp.base_commit,
            state_dir=inp.state_dir,
            parent_workflow_id=workflow.info().workflow_id,
            start_commit=start_commit,
        )
        task = asyncio.ensure_future(self._child(child))
        self.running[shard.id] = task
        try:
            result = await task
        except asyncio.CancelledError:
            status.state, status.reason = "failed", "cancelled"
            return None
        finally:
            self.running.pop(shard.id, None)
        # A re-run's turns and cost add to the first run's: both were spent.
        status.turns += result.turns
        status.usage = status.usage.add(result.usage)
        status.repairs += result.repairs
        if result.state == "failed":
            status.state, status.reason, status.verify_tail = "failed", result.reason, result.verify_tail
        else:
            status.state = "verified"
        return result

    async def _child(self, child: ShardInput) -> ShardResult:
        try:
            result: ShardResult = await workflow.execute_child_workflow(
                names.SHARD_WORKFLOW,
                child,
                id=f"{workflow.info().workflow_id}-shard-{child.shard.id}{'-again' if child.start_commit else ''}",
                task_queue=workflow.info().task_queue,
                result_type=ShardResult,
                parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
            )
        except ChildWorkflowError as err:
            return ShardResult(
                state="failed",
                reason=f"the shard's session failed: {cause(err)}",
                session_file=child.session_config.session_path,
            )
        return result

    async def _commit_or_rerun(self, status: ShardStatus, result: ShardResult, output: str) -> None:
        """Commit a verified shard on the output branch. A patch that does not apply there
        (an earlier shard changed the same lines) runs the shard once more, in a fresh
        worktree at the branch's head, and that patch is committed; if it does not apply
        either, or no new shard may start, the shard is a `conflict`. Integration waits for
        the re-run, so at most one runs beyond the window."""
        done = await self._integrate(status, result, output)
        if done.conflict and done.head and workflow.patched(RERUN_ON_CONFLICT) and self._may_start():
            status.rerun = True
            again = await self._shard(status, start_commit=done.head)
            if again is None or again.state == "failed" or not again.patch_path:
                status.reason = f"its re-run after a conflict: {status.reason}"
                return
            done = await self._integrate(status, again, output)
        if done.commit:
            status.state, status.commit = "committed", done.commit
        else:
            tried = " (nor did a re-run on its head)" if status.rerun else ""
            status.state, status.reason = (
                "conflict",
                f"its patch does not apply on the output branch{tried}: {done.conflict}",
            )

    async def _integrate(self, status: ShardStatus, result: ShardResult, output: str) -> IntegrateResult:
        assert result.patch_path is not None
        step_names = ", ".join(s.name for s in self.inp.spec.steps)
        done: IntegrateResult = await workflow.execute_activity(
            names.INTEGRATE_SHARD,
            IntegrateInput(
                worktree=output,
                base_commit=self.inp.base_commit,
                patch_path=result.patch_path,
                pipeline_id=self.inp.pipeline_id,
                shard_id=status.shard.id,
                message=f"{self.inp.spec.name} ({step_names}): {' '.join(status.shard.files)}",
            ),
            result_type=IntegrateResult,
            start_to_close_timeout=GIT_TIMEOUT,
            heartbeat_timeout=ACTIVITY_HEARTBEAT,
            retry_policy=GIT_RETRY,
        )
        return done

    async def _final(self, output: str) -> None:
        command = self.inp.spec.final.verify
        # A run a budget stopped has shards left; the run that goes on verifies the whole.
        if command is None or self.progress.cancelled or self.progress.stopped_by:
            return
        self.progress.phase = "final"
        outcome: CommandOutcome = await workflow.execute_activity(
            names.RUN_VERIFY,
            VerifyInput(cwd=output, command=command, timeout_s=3600),
            result_type=CommandOutcome,
            start_to_close_timeout=timedelta(hours=1, minutes=5),
            heartbeat_timeout=ACTIVITY_HEARTBEAT,
            retry_policy=GIT_RETRY,
        )
        self.progress.final_verify = "passed" if outcome.passed else "failed"
        self.progress.final_verify_tail = None if outcome.passed else outcome.tail
