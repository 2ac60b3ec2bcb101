"""PipelineWorkflow: a refactor run shard by shard over a repository.

Its id is the pipeline's (name, spec hash, base commit), so the same command run again
finds this run. It prepares the output branch and reads the shards already committed there
(by their trailers, so even a run whose Temporal state is gone skips them), runs the setup
once, then runs the other shards as PipelineShardWorkflow children in a sliding window and
commits each verified shard's patch on the output branch, in the order they started.

Operators steer a run with updates (pause, resume, retry or skip a shard, the concurrency);
their validators refuse what cannot be done, so the caller hears why. A run whose history is
full lets its shards at work finish, then continues as new with every shard's state; with
`final.commits: squash` the branch becomes one commit at the end."""

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
        SHARD_REVISION,
        CommandOutcome,
        IntegrateInput,
        IntegrateManyInput,
        IntegrateManyResult,
        IntegrateResult,
        OutputInput,
        OutputReady,
        PipelineCarried,
        PipelineInput,
        PipelineProgress,
        ReleaseInput,
        SetupInput,
        ShardInput,
        ShardPatch,
        ShardPrepareInput,
        ShardProgressSignal,
        ShardResult,
        ShardStatus,
        SquashInput,
        VerifyInput,
    )
    from tempi.workflows.session.activity_errors import cause
    from tempi.workflows.session.entries import now_ms

GIT_RETRY = RetryPolicy(maximum_attempts=5, initial_interval=timedelta(seconds=1))
GIT_TIMEOUT = timedelta(minutes=10)
# Histories from before a conflicting shard ran again marked it `conflict` at once.
RERUN_ON_CONFLICT = "pipeline-rerun-on-conflict"
# Histories from before ran a fixed window of shards in one run, with no operator controls,
# no continue-as-new and no squash.
CONTROLS = "pipeline-controls"
# Histories from before ran setup only when a shard was left to run (a final verify that
# needed what setup made failed in a run whose shards were all committed), and a failed
# setup left the output worktree holding the branch.
SETUP_EVERYWHERE = "pipeline-setup-everywhere"
# Histories from before integrated one shard per activity, and ran their shards' workflows
# at revision 0 (see ShardInput.revision).
INTEGRATE_TOGETHER = "pipeline-integrate-together"
# Histories from before made a new checkout for every shard that found no committed shard's
# worktree to take over, however far integration lagged behind the shards.
WORKTREE_CAP = "pipeline-worktree-cap"
# The checkouts a run holds beyond its concurrency (see _checkout_cap): with 2, 200 trivial
# shards 8 at once stalled the window often enough to take about a fifth more (and smaller)
# integrations and ~1 more history event a shard; with 4, about as many as with no cap.
CHECKOUTS_BEYOND_CONCURRENCY = 4
SETUP_RETRY = RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=1))


@workflow.defn(name=names.PIPELINE_WORKFLOW)
class PipelineWorkflow:
    @workflow.init
    def __init__(self, inp: PipelineInput) -> None:
        self.inp = inp
        carried = inp.carried
        if carried is not None:
            self.progress = carried.progress
            self.progress.runs += 1
        else:
            self.progress = PipelineProgress(
                pipeline_id=inp.pipeline_id,
                name=inp.spec.name,
                branch=inp.spec.branch,
                base_commit=inp.base_commit,
                shards=[ShardStatus(shard=s) for s in inp.shards],
                spent_before_usd=inp.spent_before_usd,
                concurrency=inp.concurrency,
            )
        self.by_id = {s.shard.id: s for s in self.progress.shards}
        self.stop_new = False
        # budget.deadline counts from the start of the command's run, across continue-as-new.
        self.started = carried.started_at if carried is not None else workflow.now()
        self.running: dict[str, asyncio.Task[ShardResult]] = {}
        self.legacy = False  # a run from before the controls (replayed from its history)
        # Shards waiting to start, in order (a skip before the first start takes one out).
        self.queue = [s.shard.id for s in self.progress.shards if s.state == "pending"]
        self.active = 0  # shards whose session is at work (the window counts these)
        self.busy = 0  # shards started and not yet integrated
        self.draining = False  # the history is full: no new start, then continue as new
        # Committed shards of this run whose worktrees the next shards take over (instead of
        # a new checkout each, and as many left for the end to remove).
        self.spare_worktrees: list[str] = list(carried.spare_worktrees) if carried is not None else []
        # This run integrates shards together and runs their workflows at SHARD_REVISION.
        self.together = False
        # This run holds at most _checkout_cap() checkouts: the spare ones and those of
        # `holding`, the shards at work or verified and waiting to be integrated. A failed or
        # conflicting shard's checkout stays for a look and leaves the count (see _keep).
        self.capped = False
        self.holding: set[str] = set()

    @workflow.query
    def get_progress(self) -> PipelineProgress:
        if not self._waiting_for_checkout():
            return self.progress
        return self.progress.model_copy(update={"waiting_for_checkout": True})

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

    def _controllable(self) -> None:
        if self.legacy:
            raise ValueError(
                "this pipeline started on a tempi without pause, resume, retry, skip or concurrency "
                "changes; `tempi pipeline cancel` it and run the same command again (committed shards stay)"
            )
        if self.progress.phase == "done":
            raise ValueError("this pipeline has finished")

    def _status(self, shard_id: str) -> ShardStatus:
        status = self.by_id.get(shard_id)
        if status is None:
            raise ValueError(f"no shard {shard_id!r} in this pipeline; `tempi pipeline status ID` lists them")
        return status

    @workflow.update(name=names.PAUSE)
    def pause(self) -> str:
        self.progress.paused = True
        return "paused: no new shard starts; the running ones finish"

    @pause.validator
    def _check_pause(self) -> None:
        self._controllable()

    @workflow.update(name=names.RESUME)
    def resume(self) -> str:
        self.progress.paused = False
        return "resumed: shards start again"

    @resume.validator
    def _check_resume(self) -> None:
        self._controllable()

    @workflow.update(name=names.RETRY_SHARD)
    def retry_shard(self, shard_id: str) -> str:
        status = self.by_id[shard_id]
        status.state, status.reason, status.verify_tail, status.rerun = "pending", None, None, False
        status.retries += 1
        self.queue.append(shard_id)
        return f"shard {status.shard.index} {shard_id} runs again when a slot is free"

    @retry_shard.validator
    def _check_retry(self, shard_id: str) -> None:
        self._controllable()
        status = self._status(shard_id)
        if status.state not in ("failed", "conflict"):
            raise ValueError(
                f"shard {shard_id} is {status.state}; only a failed or conflict shard runs again"
            )
        if self.stop_new:
            why = "it was cancelled" if self.progress.cancelled else "a budget or on_shard_failure: stop"
            raise ValueError(
                f"this pipeline starts no more shards ({why}); run the same command again instead"
            )

    @workflow.update(name=names.SKIP_SHARD)
    def skip_shard(self, shard_id: str) -> str:
        status = self.by_id[shard_id]
        self.queue.remove(shard_id)
        status.state, status.reason = "skipped", "skipped by an operator"
        return f"shard {status.shard.index} {shard_id} skipped"

    @skip_shard.validator
    def _check_skip(self, shard_id: str) -> None:
        self._controllable()
        status = self._status(shard_id)
        if status.state != "pending" or shard_id not in self.queue:
            raise ValueError(f"shard {shard_id} is {status.state}; only a pending shard can be skipped")

    @workflow.update(name=names.SET_CONCURRENCY)
    def set_concurrency(self, concurrency: int) -> str:
        self.progress.concurrency = concurrency
        return f"concurrency {concurrency}: shards at work at once from now on"

    @set_concurrency.validator
    def _check_concurrency(self, concurrency: int) -> None:
        self._controllable()
        if concurrency < 1:
            raise ValueError(f"concurrency {concurrency}: give a positive whole number, e.g. 4")

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
        self.legacy = not workflow.patched(CONTROLS)
        if inp.carried is not None:
            output = inp.carried.output_worktree
        else:
            prepared = await self._prepare(inp)
            if prepared is None:
                return self.progress
            output = prepared
        self.progress.phase = "shards"
        if self.legacy:
            await self._run_shards([s for s in self.progress.shards if s.state == "pending"], output)
        else:
            await self._run_controlled(output)
            if self.draining and self.queue and not self.stop_new:
                await workflow.wait_condition(workflow.all_handlers_finished)
                carried = PipelineCarried(
                    progress=self.progress,
                    output_worktree=output,
                    started_at=self.started,
                    spare_worktrees=self.spare_worktrees,
                )
                workflow.continue_as_new(inp.model_copy(update={"carried": carried}))
        await self._final(output)
        if not self.legacy:
            await self._squash(output)
        await self._release()
        self.progress.phase = "done"
        return self.progress

    async def _release(self) -> None:
        await workflow.execute_activity(
            names.RELEASE_WORKTREES,
            ReleaseInput(
                repo_root=self.inp.repo_root,
                state_dir=self.inp.state_dir,
                committed_shards=[s.shard.id for s in self.progress.shards if s.state == "committed"],
            ),
            start_to_close_timeout=GIT_TIMEOUT,
            heartbeat_timeout=ACTIVITY_HEARTBEAT,
            retry_policy=GIT_RETRY,
        )

    async def _prepare(self, inp: PipelineInput) -> str | None:
        """The output worktree, with the shards its branch already has marked committed, after
        the setup commands; None when the setup failed (every shard left is failed then)."""
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
        # The final verify runs in this checkout too, and may need what setup makes there.
        if (
            inp.spec.setup
            and not self.progress.cancelled
            and (todo or (inp.spec.final.verify is not None and workflow.patched(SETUP_EVERYWHERE)))
        ):
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
                self.progress.setup_failure = failed
                code = "timed out" if failed.exit_code is None else f"exit {failed.exit_code}"
                for status in todo:
                    status.state, status.reason = "failed", f"setup failed ({code}): {failed.command}"
                    status.verify_tail = failed.tail
                if workflow.patched(SETUP_EVERYWHERE):
                    await self._release()
                self.progress.phase = "done"
                return None
        return ready.worktree

    def _history_full(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() >= self.inp.history_event_budget
        )

    def _concurrency(self) -> int:
        return self.progress.concurrency or self.inp.concurrency

    def _may_start_next(self) -> bool:
        return (
            bool(self.queue)
            and not self.progress.paused
            and not self.stop_new
            and not self.draining
            and self.active < self._concurrency()
            and (not self.capped or self._checkout_free())
        )

    def _waiting_for_checkout(self) -> bool:
        """Whether the next shard would start now but for the checkout cap."""
        return (
            self.capped
            and bool(self.queue)
            and not self.progress.paused
            and not self.stop_new
            and not self.draining
            and self.active < self._concurrency()
            and not self._checkout_free()
        )

    def _checkout_cap(self) -> int:
        """The most checkouts a run holds: one per shard at work, and CHECKOUTS_BEYOND_CONCURRENCY
        for shards verified while an integration runs (they keep theirs until committed), so
        the window stays full while integration keeps up. Once integration lags further, a new
        shard waits for a committed shard's checkout instead of making one more, and the end of
        the run has at most this many to remove. A lower concurrency makes no new checkout
        until the run holds fewer; the spare ones it has go to the next shards."""
        return self._concurrency() + CHECKOUTS_BEYOND_CONCURRENCY

    def _checkout_free(self) -> bool:
        """Whether the next shard has a checkout to work in: a committed shard's to take
        over, room under the cap for a new one, or (a retry) its own, kept since it failed:
        it comes back into the count without a new checkout."""
        if self.by_id[self.queue[0]].retries or self.spare_worktrees:
            return True
        return len(self.holding) < self._checkout_cap()

    def _take_checkout(self, status: ShardStatus) -> str | None:
        """The shard holds a checkout from now on; the committed shard whose worktree it takes
        over, if any (None: its own, or a new one)."""
        self.holding.add(status.shard.id)
        if status.retries or not self.spare_worktrees:
            return None
        return self.spare_worktrees.pop(0)

    def _keep(self, status: ShardStatus) -> None:
        """A shard that failed or conflicts keeps its checkout for a look (`tempi pipeline
        clean` removes it), outside the cap: counted, kept ones would leave a run with as
        many failures as the cap no checkout to start another shard in."""
        self.holding.discard(status.shard.id)

    def _settled(self) -> bool:
        """Nothing at work and nothing more to start in this run (a paused pipeline with
        shards left waits for a resume)."""
        nothing_next = not self.queue or self.stop_new or self.draining
        return self.active == 0 and self.busy == 0 and nothing_next

    async def _run_controlled(self, output: str) -> None:
        """Start the pending shards in order, as many at once as the concurrency (which an
        operator may change), none while paused; integrate their patches in the order they
        started. Once the history is full no new shard starts, so the run can continue as
        new with no child at work."""
        # The output branch may have had some of them already.
        self.queue = [shard_id for shard_id in self.queue if self.by_id[shard_id].state == "pending"]
        order: list[str] = []  # shard ids in the order they started (a retry starts again)
        results: dict[int, ShardResult | None] = {}
        integrated = 0
        integrating = asyncio.Lock()

        self.together = workflow.patched(INTEGRATE_TOGETHER)
        together = self.together
        self.capped = workflow.patched(WORKTREE_CAP)

        async def integrate_in_order() -> None:
            nonlocal integrated
            async with integrating:
                while integrated < len(order) and integrated in results:
                    if together:
                        # Every shard whose turn has come, in one activity: integration keeps
                        # up with shards however fast they end.
                        ready, upto = [], integrated
                        while upto < len(order) and upto in results:
                            status, result = self.by_id[order[upto]], results[upto]
                            if result is not None and result.state == "verified" and result.patch_path:
                                ready.append((status, result))
                            upto += 1
                        await self._commit_together(ready, output)
                        integrated = upto
                        continue
                    status, result = self.by_id[order[integrated]], results[integrated]
                    if result is not None and result.state == "verified" and result.patch_path:
                        await self._commit_or_rerun(status, result, output)
                    integrated += 1

        async def one(position: int, status: ShardStatus, spare: str | None) -> None:
            try:
                try:
                    result = await self._shard(status, spare=spare)
                finally:
                    self.active -= 1
                if result is not None and result.state == "failed":
                    self.stop_new = self.stop_new or self.inp.spec.on_shard_failure == "stop"
                if result is None or result.state != "verified" or not result.patch_path:
                    self._keep(status)
                results[position] = result
                await integrate_in_order()
            finally:
                self.busy -= 1

        tasks: list[asyncio.Task[None]] = []
        while True:
            await workflow.wait_condition(lambda: self._may_start_next() or self._settled())
            if not self._may_start_next():
                break
            # A run that started no shard yet goes on, so a tiny budget cannot loop forever.
            if order and self._history_full():
                self.draining = True
                continue
            if not self._may_start():
                continue
            status = self.by_id[self.queue.pop(0)]
            # Taken here, not when the shard's task first runs: the next start counts it.
            spare = self._take_checkout(status) if self.capped else None
            order.append(status.shard.id)
            self.active += 1
            self.busy += 1
            tasks.append(asyncio.ensure_future(one(len(order) - 1, status, spare)))
        await asyncio.gather(*tasks)

    async def _squash(self, output: str) -> None:
        """`final.commits: squash`: the branch becomes one commit once the pipeline is whole
        (a budget-stopped or cancelled run leaves its per-shard commits for the next run)."""
        if self.inp.spec.final.commits != "squash" or self.progress.cancelled or self.progress.stopped_by:
            return
        committed = [s.shard.id for s in self.progress.shards if s.state == "committed"]
        if not committed:
            return
        step_names = ", ".join(s.name for s in self.inp.spec.steps)
        head: str = await workflow.execute_activity(
            names.SQUASH_OUTPUT,
            SquashInput(
                worktree=output,
                base_commit=self.inp.base_commit,
                pipeline_id=self.inp.pipeline_id,
                shard_ids=committed,
                message=f"{self.inp.spec.name} ({step_names}): {len(committed)} shard(s)",
            ),
            result_type=str,
            start_to_close_timeout=GIT_TIMEOUT,
            heartbeat_timeout=ACTIVITY_HEARTBEAT,
            retry_policy=GIT_RETRY,
        )
        for status in self.progress.shards:
            if status.state == "committed":
                status.commit = head

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

    async def _shard(
        self, status: ShardStatus, start_commit: str | None = None, spare: str | None = None
    ) -> ShardResult | None:
        """Run one shard's child session (at the base commit, or at `start_commit` of the output
        branch when it runs again after a conflict), in the worktree of `spare` (a committed
        shard) moved to it when given; None when the pipeline was cancelled first."""
        inp = self.inp
        shard = status.shard
        status.state = "running"
        if not self.capped:
            # A shard that ran before (a retry, a re-run) has its own worktree to go on with.
            fresh = start_commit is None and not status.retries and not self.legacy
            spare = self.spare_worktrees.pop(0) if fresh and self.spare_worktrees else None
        worktree: str = await workflow.execute_activity(
            names.PREPARE_SHARD,
            ShardPrepareInput(
                repo_root=inp.repo_root,
                base_commit=start_commit or inp.base_commit,
                state_dir=inp.state_dir,
                shard_id=shard.id,
                spare=spare,
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
            revision=SHARD_REVISION if self.together else 0,
        )
        task = asyncio.ensure_future(self._child(child, status.retries))
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

    async def _child(self, child: ShardInput, retries: int) -> ShardResult:
        # Each run of a shard is its own child workflow (a retry's id says which it is).
        suffix = (f"-retry{retries}" if retries else "") + ("-again" if child.start_commit else "")
        try:
            result: ShardResult = await workflow.execute_child_workflow(
                names.SHARD_WORKFLOW,
                child,
                id=f"{workflow.info().workflow_id}-shard-{child.shard.id}{suffix}",
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
        """Commit a verified shard on the output branch (see _settle)."""
        await self._settle(status, await self._integrate(status, result, output), output)

    async def _commit_together(self, ready: list[tuple[ShardStatus, ShardResult]], output: str) -> None:
        """Commit verified shards on the output branch in order, as many as apply in one
        activity; one whose patch does not apply is settled (see _settle) before the ones
        after it are tried."""
        while ready:
            done: IntegrateManyResult = await workflow.execute_activity(
                names.INTEGRATE_SHARDS,
                IntegrateManyInput(
                    worktree=output,
                    pipeline_id=self.inp.pipeline_id,
                    shards=[
                        ShardPatch(
                            shard_id=s.shard.id, patch_path=r.patch_path or "", message=self._message(s)
                        )
                        for s, r in ready
                    ],
                ),
                result_type=IntegrateManyResult,
                start_to_close_timeout=GIT_TIMEOUT,
                heartbeat_timeout=ACTIVITY_HEARTBEAT,
                retry_policy=GIT_RETRY,
            )
            for (status, _), commit in zip(ready, done.commits, strict=False):
                self._committed(status, commit)
            ready = ready[len(done.commits) :]
            if ready:
                status, _ = ready.pop(0)
                await self._settle(status, IntegrateResult(conflict=done.conflict, head=done.head), output)

    async def _settle(self, status: ShardStatus, done: IntegrateResult, output: str) -> None:
        """A verified shard after its patch met the output branch. A patch that did not apply
        there (an earlier shard changed the same lines) runs the shard once more, in a fresh
        worktree at the branch's head, and that patch is committed; if it does not apply
        either, or no new shard may start, the shard is a `conflict`. Integration waits for
        the re-run, so at most one runs beyond the window."""
        if done.conflict and done.head and workflow.patched(RERUN_ON_CONFLICT) and self._may_start():
            status.rerun = True
            again = await self._shard(status, start_commit=done.head)
            if again is None or again.state == "failed" or not again.patch_path:
                status.reason = f"its re-run after a conflict: {status.reason}"
                self._keep(status)
                return
            done = await self._integrate(status, again, output)
        if done.commit:
            self._committed(status, done.commit)
        else:
            self._keep(status)
            tried = " (nor did a re-run on its head)" if status.rerun else ""
            status.state, status.reason = (
                "conflict",
                f"its patch does not apply on the output branch{tried}: {done.conflict}",
            )

    def _committed(self, status: ShardStatus, commit: str) -> None:
        status.state, status.commit = "committed", commit
        self.holding.discard(status.shard.id)
        self.spare_worktrees.append(status.shard.id)

    def _message(self, status: ShardStatus) -> str:
        step_names = ", ".join(s.name for s in self.inp.spec.steps)
        return f"{self.inp.spec.name} ({step_names}): {' '.join(status.shard.files)}"

    async def _integrate(self, status: ShardStatus, result: ShardResult, output: str) -> IntegrateResult:
        assert result.patch_path is not None
        done: IntegrateResult = await workflow.execute_activity(
            names.INTEGRATE_SHARD,
            IntegrateInput(
                worktree=output,
                base_commit=self.inp.base_commit,
                patch_path=result.patch_path,
                pipeline_id=self.inp.pipeline_id,
                shard_id=status.shard.id,
                message=self._message(status),
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
