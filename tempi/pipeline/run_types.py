"""What crosses history in a pipeline run: the workflow's input and result, each shard's
child input and result, the progress query's answer and the activities' payloads.

Patches and command output stay on disk (the pipeline's state directory); history only
carries paths, states and the short tail of a failed verify."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, Field

from tempi.agent.messages import Usage
from tempi.pipeline.spec import PipelineSpec
from tempi.pipeline.targets import Shard
from tempi.workflows.session_types import CarriedState, SessionConfig

PIPELINE_WORKFLOW = "PipelineWorkflow"
SHARD_WORKFLOW = "PipelineShardWorkflow"

# Activity names (the workflows name activities by string, never import their code).
PREPARE_OUTPUT = "pipeline_prepare_output"
RUN_SETUP = "pipeline_run_setup"
PREPARE_SHARD = "pipeline_prepare_shard"
RUN_VERIFY = "pipeline_run_verify"
SAVE_SHARD_PATCH = "pipeline_save_shard_patch"
INTEGRATE_SHARD = "pipeline_integrate_shard"
INTEGRATE_SHARDS = "pipeline_integrate_shards"
RELEASE_WORKTREES = "pipeline_release_worktrees"
SQUASH_OUTPUT = "pipeline_squash_output"

# Operator controls on a running pipeline (updates, so a refusal reaches the caller).
PAUSE = "pause"
RESUME = "resume"
RETRY_SHARD = "retry_shard"
SKIP_SHARD = "skip_shard"
SET_CONCURRENCY = "set_concurrency"

# The pipeline's activities heartbeat while they work; one whose worker died is retried after
# this long without a beat, not at the end of its start-to-close timeout.
ACTIVITY_HEARTBEAT = timedelta(seconds=10)

ShardState = Literal[
    "pending", "running", "stepped", "verified", "committed", "failed", "conflict", "skipped"
]
DONE_STATES = frozenset({"committed", "failed", "conflict", "skipped"})
# A run continues as new once its history has this many events (or Temporal suggests it).
HISTORY_EVENT_BUDGET = 10_000
# A shard's session workflow is started with this template; `{cwd}` is filled per shard.
SHARD_REVISION = 1  # see ShardInput.revision
SHARD_CWD_MARK = "@@TEMPI_SHARD_CWD@@"


class PipelineInput(BaseModel):
    pipeline_id: str  # the spec's id (trailers name it); the workflow id may add a --fresh suffix
    spec: PipelineSpec
    repo_root: str
    base_commit: str
    shards: list[Shard]
    state_dir: str  # the pipeline's own directory in tempi's home
    concurrency: int
    session: SessionConfig  # the template of every shard's session
    # What earlier runs of this pipeline cost: a run that a budget stopped is followed by
    # one that goes on, and budget.max_cost_usd counts the pipeline's whole spending.
    spent_before_usd: float = 0.0
    history_event_budget: int = HISTORY_EVENT_BUDGET
    # Set when an earlier run of this workflow continued as new: where it left off.
    carried: PipelineCarried | None = None


class ShardStatus(BaseModel):
    shard: Shard
    state: ShardState = "pending"
    reason: str | None = None  # why it failed, in words
    verify_tail: str | None = None  # the last failed verify's output tail
    repairs: int = 0
    turns: int = 0
    usage: Usage = Field(default_factory=Usage)
    commit: str | None = None
    session_file: str | None = None
    resumed: bool = False  # committed by an earlier run (found by its trailer)
    rerun: bool = False  # its patch conflicted, so it ran again on the output branch's head
    retries: int = 0  # times an operator asked for it to run again


class PipelineProgress(BaseModel):
    pipeline_id: str
    name: str
    branch: str
    base_commit: str
    phase: Literal["starting", "shards", "final", "done"] = "starting"
    shards: list[ShardStatus]
    final_verify: Literal["passed", "failed", "skipped"] | None = None
    final_verify_tail: str | None = None
    cancelled: bool = False
    stopped_by: str | None = None  # the budget key that kept the remaining shards from starting
    spent_before_usd: float = 0.0
    paused: bool = False  # no new shard starts until it is resumed
    concurrency: int | None = None  # shards at work at once (None: a run from before controls)
    runs: int = 1  # runs of the workflow so far (each continue-as-new adds one)
    # The setup command that failed, so no shard started (its output's tail is in it).
    setup_failure: CommandOutcome | None = None
    # Told by the progress query, never kept: the next shard waits until integration commits
    # a shard whose checkout it can take over (the run holds as many checkouts as it may).
    waiting_for_checkout: bool = False

    def cost_usd(self) -> float:
        """What the pipeline has cost, this run's shards and the runs before it."""
        return self.spent_before_usd + sum(s.usage.cost.total for s in self.shards)


class PipelineCarried(BaseModel):
    """What a pipeline run hands the run it continues as new: every shard's state (so the
    committed and failed ones stay done), the output worktree and when the pipeline began."""

    progress: PipelineProgress
    output_worktree: str
    started_at: datetime
    spare_worktrees: list[str] = Field(default_factory=list)  # committed shards' worktrees to take over


class OutputInput(BaseModel):
    repo_root: str
    base_commit: str
    branch: str
    state_dir: str
    pipeline_id: str


class OutputReady(BaseModel):
    worktree: str
    # shard id -> commit, for the shards this pipeline already committed on the branch
    committed: dict[str, str] = Field(default_factory=dict)


class SetupInput(BaseModel):
    worktree: str
    base_commit: str
    state_dir: str
    commands: list[str]


class CommandOutcome(BaseModel):
    command: str
    exit_code: int | None  # None: timed out
    tail: str
    passed: bool


class ShardPrepareInput(BaseModel):
    repo_root: str
    base_commit: str
    state_dir: str
    shard_id: str
    spare: str | None = None  # a committed shard whose worktree this one may take over


class VerifyInput(BaseModel):
    cwd: str
    command: str
    timeout_s: int


class PatchInput(BaseModel):
    cwd: str
    base_commit: str
    state_dir: str
    shard_id: str


class IntegrateInput(BaseModel):
    worktree: str
    base_commit: str
    patch_path: str
    pipeline_id: str
    shard_id: str
    message: str


class IntegrateResult(BaseModel):
    commit: str | None = None
    conflict: str | None = None  # why the patch did not apply
    head: str | None = None  # the output branch's commit it did not apply on


class ShardPatch(BaseModel):
    shard_id: str
    patch_path: str
    message: str


class IntegrateManyInput(BaseModel):
    """Shards whose turn on the output branch has come together, in order."""

    worktree: str
    pipeline_id: str
    shards: list[ShardPatch]


class IntegrateManyResult(BaseModel):
    commits: list[str]  # of the first len(commits) shards, in order
    conflict: str | None = None  # why the next one's patch did not apply (the rest were not tried)
    head: str | None = None  # the output branch's commit it did not apply on


class SquashInput(BaseModel):
    worktree: str
    base_commit: str
    pipeline_id: str
    shard_ids: list[str]  # the committed shards, in shard order, one trailer each
    message: str


class ReleaseInput(BaseModel):
    repo_root: str
    state_dir: str
    committed_shards: list[str]


class ShardInput(BaseModel):
    session_config: SessionConfig
    shard: Shard
    pipeline_id: str
    spec: PipelineSpec
    shard_count: int
    base_commit: str
    state_dir: str
    parent_workflow_id: str  # told of the shard's progress by signal
    # A shard's session that continued as new goes on from here.
    carried: CarriedState | None = None
    next_step: int = 0
    repairs_done: int = 0
    step_started_at_turn: int = 0  # the shard's turn count when the current prompt began
    # A re-run after a conflict starts at this output-branch commit, and its patch is taken
    # against it, instead of the base commit.
    start_commit: str | None = None
    # What the shard's workflow does, for the command sequence its history holds: 0 (runs
    # from before) tells the pipeline its steps are done always, waiting for the signal to
    # land, and saves its patch in an activity; 1 (SHARD_REVISION) tells only when a verify
    # follows, going on at once, and saves its patch in a local activity.
    revision: int = 0


class ShardProgressSignal(BaseModel):
    shard_id: str
    state: ShardState
    session_file: str | None = None


class ShardResult(BaseModel):
    state: Literal["verified", "failed"]
    reason: str | None = None
    verify_tail: str | None = None
    repairs: int = 0
    turns: int = 0
    usage: Usage = Field(default_factory=Usage)
    patch_path: str | None = None
    session_file: str


PipelineInput.model_rebuild()
