"""Thin activities over `tempi.pipeline`'s plain functions; blocking git and shell work
runs in a thread so the worker's loop keeps serving sessions, and heartbeats while it does,
so an activity whose worker died is retried elsewhere within the workflow's heartbeat
timeout instead of at the end of its start-to-close timeout. Every one is safe to run again
(the plain functions say how)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from tempi.activities.heartbeat import Heartbeater
from tempi.pipeline import git_work
from tempi.pipeline import run_types as names
from tempi.pipeline.commands import run_command
from tempi.pipeline.rebase import rebase_output, shards_on_base
from tempi.pipeline.run_types import (
    CommandOutcome,
    IntegrateInput,
    IntegrateManyInput,
    IntegrateManyResult,
    IntegrateResult,
    OutputInput,
    OutputReady,
    PatchInput,
    ReleaseInput,
    SetupInput,
    ShardPatch,
    ShardPrepareInput,
    SquashInput,
    VerifyInput,
)
from tempi.pipeline.setup import run_setup, setup_excludes, share_setup

T = TypeVar("T")


async def _beating(fn: Callable[..., T], *args: Any) -> T:
    async with Heartbeater():
        return await asyncio.to_thread(fn, *args)


def _said(err: git_work.GitWorkError) -> ApplicationError:
    # A git refusal (a branch checked out elsewhere) does not go away by retrying.
    return ApplicationError(str(err), type="PipelineGitError", non_retryable=True)


@activity.defn(name=names.PREPARE_OUTPUT)
async def prepare_output(inp: OutputInput) -> OutputReady:
    def work() -> OutputReady:
        tree = git_work.prepare_output(inp.repo_root, inp.base_commit, inp.branch, inp.state_dir)
        # The branch from a run on an older base goes on this one first (main moved).
        rebase_output(tree, inp.base_commit, inp.pipeline_id, inp.state_dir)
        committed = {shard: inp.base_commit for shard in shards_on_base(inp.state_dir)}
        committed.update(git_work.committed_shards(tree, inp.base_commit, inp.pipeline_id))
        return OutputReady(worktree=tree, committed=committed)

    try:
        return await _beating(work)
    except git_work.GitWorkError as err:
        raise _said(err) from None


@activity.defn(name=names.RUN_SETUP)
async def setup(inp: SetupInput) -> CommandOutcome | None:
    return await _beating(run_setup, inp.commands, inp.worktree, inp.base_commit)


@activity.defn(name=names.PREPARE_SHARD)
async def prepare_shard(inp: ShardPrepareInput) -> str:
    def work() -> str:
        tree = git_work.prepare_shard_worktree(
            inp.repo_root, inp.base_commit, inp.state_dir, inp.shard_id, inp.spare
        )
        # Steps and verify run here: they get what setup made in the output checkout.
        share_setup(git_work.output_worktree(inp.state_dir), tree)
        return tree

    try:
        return await _beating(work)
    except git_work.GitWorkError as err:
        raise _said(err) from None


@activity.defn(name=names.RUN_VERIFY)
async def verify(inp: VerifyInput) -> CommandOutcome:
    return await _beating(run_command, inp.command, inp.cwd, inp.timeout_s)


@activity.defn(name=names.SAVE_SHARD_PATCH)
async def save_patch(inp: PatchInput) -> str:
    def work() -> str:
        return git_work.save_shard_patch(
            inp.cwd, inp.base_commit, inp.state_dir, inp.shard_id, keep_out=setup_excludes(inp.cwd)
        )

    return await _beating(work)


@activity.defn(name=names.INTEGRATE_SHARD)
async def integrate(inp: IntegrateInput) -> IntegrateResult:
    """One shard (histories from before shards were integrated together)."""
    done = await integrate_many(
        IntegrateManyInput(
            worktree=inp.worktree,
            pipeline_id=inp.pipeline_id,
            shards=[ShardPatch(shard_id=inp.shard_id, patch_path=inp.patch_path, message=inp.message)],
        )
    )
    return IntegrateResult(
        commit=done.commits[0] if done.commits else None, conflict=done.conflict, head=done.head
    )


@activity.defn(name=names.INTEGRATE_SHARDS)
async def integrate_many(inp: IntegrateManyInput) -> IntegrateManyResult:
    def work() -> tuple[list[str], str | None]:
        patches = [(s.shard_id, s.patch_path, s.message) for s in inp.shards]
        return git_work.integrate_many(
            inp.worktree, inp.pipeline_id, patches, keep=setup_excludes(inp.worktree)
        )

    commits, conflict = await _beating(work)
    if conflict is None:
        return IntegrateManyResult(commits=commits)
    head = await _beating(git_work.git, inp.worktree, "rev-parse", "HEAD")
    return IntegrateManyResult(commits=commits, conflict=conflict, head=head.strip())


@activity.defn(name=names.SQUASH_OUTPUT)
async def squash(inp: SquashInput) -> str:
    try:
        return await _beating(
            git_work.squash_output, inp.worktree, inp.base_commit, inp.pipeline_id, inp.shard_ids, inp.message
        )
    except git_work.GitWorkError as err:
        raise _said(err) from None


@activity.defn(name=names.RELEASE_WORKTREES)
async def release(inp: ReleaseInput) -> None:
    try:
        await _beating(git_work.release_worktrees, inp.repo_root, inp.state_dir, inp.committed_shards)
    except git_work.GitWorkError as err:
        raise _said(err) from None


PIPELINE_ACTIVITIES: list[Callable[..., Any]] = [
    prepare_output,
    setup,
    prepare_shard,
    verify,
    save_patch,
    integrate,
    integrate_many,
    squash,
    release,
]
