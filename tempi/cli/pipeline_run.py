"""`tempi pipeline run SPEC` for real: start the PipelineWorkflow (or find the one this spec
and base commit already have), print a line per shard state change, then the summary, the
reports and the exit code."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import cast

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from tempi.agent.model_selection import select_model
from tempi.agent.model_spec import ModelSpec, ThinkingLevel
from tempi.agent.system_prompt import build_system_prompt
from tempi.agent.thinking_levels import DEFAULT_THINKING_LEVEL, clamp_level
from tempi.agent.tool_specs import DEFAULT_TOOLS
from tempi.cli.context_files import discover_context_files
from tempi.cli.pipeline_outputs import PipelineOutputs, absolute, remember, write_outputs
from tempi.cli.trust_choice import settle_trust
from tempi.config.api_keys import has_configured_key
from tempi.config.mcp_json import mcp_configured
from tempi.config.models_json import load_model_registry
from tempi.config.paths import pi_agent_dir, tempi_home
from tempi.config.project_trust import project_fingerprint, trust_project
from tempi.config.settings import load_settings
from tempi.extensions.discovery import discover_extensions
from tempi.pipeline.reports import (
    exit_code,
    final_verify_report,
    json_summary,
    setup_report,
    shard_count,
    summary_line,
)
from tempi.pipeline.run_types import (
    HISTORY_EVENT_BUDGET,
    PIPELINE_WORKFLOW,
    SHARD_CWD_MARK,
    PipelineInput,
    PipelineProgress,
    ShardStatus,
)
from tempi.pipeline.spec import PipelineSpec
from tempi.pipeline.targets import Discovery, pipeline_id
from tempi.workflows.session_types import (
    DEFAULT_SANDBOX_IMAGE,
    DEFAULT_TASK_QUEUE,
    CompactionPolicy,
    RetryPolicySettings,
    SandboxKind,
    SessionConfig,
)

POLL_S = 0.5
HISTORY_ENV = "TEMPI_PIPELINE_HISTORY_EVENTS"
EXIT_USAGE = 2


def model_choice(spec: PipelineSpec, root: Path) -> tuple[ModelSpec, ThinkingLevel]:
    """The model a shard uses, chosen as `tempi --model` chooses it (ModelSelectionError or
    ConfigError when there is none)."""
    registry = load_model_registry()
    settings = load_settings(root)
    selection = select_model(
        registry,
        None,
        spec.model,
        default_provider=settings.default_provider,
        default_model=settings.default_model,
        key_available=lambda p: has_configured_key(p, registry),
    )
    level = clamp_level(
        selection.model,
        selection.thinking_level or settings.default_thinking_level or DEFAULT_THINKING_LEVEL,
    )
    return selection.model, level


def key_configured(spec: PipelineSpec, root: Path) -> bool:
    """Whether the shards' model has a key here, so a run without one stops before any
    shard starts (exit 3) instead of failing every shard."""
    model, _ = model_choice(spec, root)
    return has_configured_key(model.provider, load_model_registry())


def session_template(spec: PipelineSpec, root: Path) -> SessionConfig:
    """Every shard's session as the workflow starts it; the workflow fills in the id, the
    file and the shard's worktree (SHARD_CWD_MARK)."""
    model, level = model_choice(spec, root)
    settings = load_settings(root)
    tools = list(DEFAULT_TOOLS)
    prompt = build_system_prompt(
        tools=tools,
        cwd=SHARD_CWD_MARK,
        today=time.strftime("%Y-%m-%d"),
        append=[spec.context] if spec.context.strip() else [],
        context_files=discover_context_files(root, tempi_home(), pi_agent_dir()),
    )
    kind, _, image = spec.sandbox.partition(":")
    retry, compaction = settings.retry, settings.compaction
    return SessionConfig(
        session_id="template",
        session_path="template",
        cwd=SHARD_CWD_MARK,
        model=model,
        thinking_level=level,
        system_prompt=prompt,
        tools=tools,
        sandbox=cast(SandboxKind, kind),  # the spec accepts only local, bwrap and docker
        sandbox_image=image or DEFAULT_SANDBOX_IMAGE,
        # As `tempi` in the repository would: its .tempi/ extensions and MCP servers.
        extensions=discover_extensions(root, spec.extensions),
        mcp=mcp_configured(root),
        retry=RetryPolicySettings(
            enabled=retry.enabled,
            max_retries=retry.max_retries,
            base_delay_ms=retry.base_delay_ms,
            max_delay_ms=retry.max_delay_ms,
        ),
        compaction=CompactionPolicy(
            enabled=compaction.enabled,
            reserve_tokens=compaction.reserve_tokens,
            keep_recent_tokens=compaction.keep_recent_tokens,
        ),
    )


def trust_shards(spec: PipelineSpec, root: Path, state_dir: Path) -> None:
    """`trustProject: true` trusts the repository's `.tempi/` as it is now, for the repository
    and every shard's worktree (they check out the same files); without it the shards leave
    it out, as any run that no person answers does."""
    if not spec.trust_project:
        settle_trust(None, root)
        return
    fingerprint = project_fingerprint(root)
    if fingerprint is not None:
        trust_project(root, fingerprint=fingerprint)
        trust_project(state_dir, fingerprint=fingerprint, covers_below=True)


def state_line(status: ShardStatus, count: int) -> str:
    shard = status.shard
    line = f"shard {shard.index}/{count} {shard.id} {status.state}: {' '.join(shard.files)}"
    if status.resumed:
        line += " (committed by an earlier run)"
    if status.rerun and status.state in ("running", "stepped", "verified"):
        line += " (again, at the output branch's head: its patch conflicted)"
    elif status.rerun and status.state == "committed":
        line += " (run again after a conflict)"
    if status.repairs and status.state in ("verified", "committed"):
        line += f" ({status.repairs} repair{'s' if status.repairs > 1 else ''})"
    if status.retries and status.state in ("running", "stepped", "verified", "committed"):
        line += f" (retry {status.retries})"
    if status.reason and status.state in ("failed", "conflict", "skipped"):
        line += f"\n  {status.reason}"
    return line


def _state_event(status: ShardStatus) -> str:
    return json.dumps(
        {
            "type": "shard",
            "index": status.shard.index,
            "id": status.shard.id,
            "files": status.shard.files,
            "state": status.state,
            "reason": status.reason,
            "repairs": status.repairs,
            "resumed": status.resumed,
            "rerun": status.rerun,
            "retries": status.retries,
        }
    )


class ProgressPrinter:
    """A line (or a JSON line) each time a shard's state changes, when an operator pauses or
    resumes the pipeline, and the first time a shard waits for a checkout."""

    def __init__(self, json_mode: bool = False) -> None:
        self.seen: dict[str, str] = {}
        self.paused = False
        self.told_checkout_wait = False
        self.json_mode = json_mode

    def show(self, progress: PipelineProgress) -> None:
        if progress.paused != self.paused:
            self.paused = progress.paused
            said = (
                "pipeline paused: no new shard starts until `tempi pipeline resume ID`"
                if self.paused
                else "pipeline resumed"
            )
            print(
                json.dumps({"type": "paused", "paused": self.paused}) if self.json_mode else said, flush=True
            )
        if progress.waiting_for_checkout and not self.told_checkout_wait:
            # Once: with integration behind, each commit lets one more shard start, then the
            # next waits again.
            self.told_checkout_wait = True
            said = (
                "integration is behind: each next shard waits for a committed shard's checkout "
                "(`tempi pipeline status ID` says whether one waits now)"
            )
            print(json.dumps({"type": "waiting_for_checkout"}) if self.json_mode else said, flush=True)
        count = len(progress.shards)
        for status in progress.shards:
            if self.seen.get(status.shard.id, "pending") != status.state:
                self.seen[status.shard.id] = status.state
                print(_state_event(status) if self.json_mode else state_line(status, count), flush=True)


async def start_or_find(client: Client, inp: PipelineInput, workflow_id: str) -> bool:
    """Start the pipeline's workflow, or find the running one (to attach to) or the finished
    one (for its result); True when it finished before this command."""
    # A finished pipeline is answered with its result; a failed, cancelled or terminated
    # one starts again (and skips what its branch already has).
    first_run = WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY
    try:
        await _start(client, inp, workflow_id, first_run)
        return False
    except WorkflowAlreadyStartedError:
        pass
    handle = client.get_workflow_handle(workflow_id, result_type=PipelineProgress)
    last = await handle.result()
    if last.stopped_by is None:
        return True
    # A budget stopped it: a new run goes on with the shards left, counting what it cost.
    ongoing = inp.model_copy(update={"spent_before_usd": last.cost_usd()})
    await _start(client, ongoing, workflow_id, WorkflowIDReusePolicy.ALLOW_DUPLICATE)
    return False


async def _start(client: Client, inp: PipelineInput, workflow_id: str, reuse: WorkflowIDReusePolicy) -> None:
    await client.start_workflow(
        PIPELINE_WORKFLOW,
        inp,
        id=workflow_id,
        task_queue=DEFAULT_TASK_QUEUE,
        result_type=PipelineProgress,
        id_reuse_policy=reuse,
        # Another command that started it first: this one follows that run.
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )


async def follow(
    handle: WorkflowHandle[object, PipelineProgress], json_mode: bool = False
) -> PipelineProgress:
    printer = ProgressPrinter(json_mode)
    result = asyncio.ensure_future(handle.result())
    while not result.done():
        try:
            progress: PipelineProgress = await handle.query("get_progress", result_type=PipelineProgress)
        except RPCError as err:
            # A query the busy worker did not answer in time (the client reports its own
            # timeout as cancelled): the pipeline goes on, and so does following it; the next
            # poll shows where it is.
            if err.status not in (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED):
                raise
        else:
            printer.show(progress)
        await asyncio.wait([result], timeout=POLL_S)
    final = result.result()
    printer.show(final)
    return final


def failure_cause(err: WorkflowFailureError | WorkflowUpdateFailedError) -> str:
    cause: BaseException = err.cause
    while cause.__cause__ is not None:
        cause = cause.__cause__
    return str(cause)


def lost_server_line(err: BaseException, command: str) -> str:
    """What a command that followed a pipeline says when the server went away under it."""
    return (
        f"tempi pipeline: lost the Temporal server ({err}). The pipeline is kept on the server: "
        f"once it runs again (`tempi server status` says), `{command}` goes on where it was, "
        "without redoing committed shards."
    )


def history_budget() -> int:
    """Events a pipeline run's history may reach before it continues as new; a lower
    TEMPI_PIPELINE_HISTORY_EVENTS makes runs (and so each history) smaller."""
    value = os.environ.get(HISTORY_ENV, "")
    return int(value) if value.isdigit() and int(value) > 0 else HISTORY_EVENT_BUDGET


async def run_pipeline(
    spec: PipelineSpec,
    discovery: Discovery,
    *,
    fresh: bool,
    detach: bool,
    concurrency: int | None,
    json_path: str | None,
    junit: str | None,
    markdown: str | None = None,
    json_mode: bool = False,
) -> int:
    from tempi.cli.runtime import open_runtime

    root = Path(discovery.root)
    pid = pipeline_id(spec, discovery.base_commit)
    workflow_id = f"{pid}-{int(time.time())}" if fresh else pid
    trust_shards(spec, root, tempi_home() / "pipelines" / pid)
    inp = PipelineInput(
        pipeline_id=pid,
        history_event_budget=history_budget(),
        spec=spec,
        repo_root=discovery.root,
        base_commit=discovery.base_commit,
        shards=discovery.shards,
        state_dir=str(tempi_home() / "pipelines" / pid),
        concurrency=concurrency or spec.concurrency,
        session=session_template(spec, root),
    )
    outputs = PipelineOutputs(
        repo_root=discovery.root,
        json_path=absolute(json_path or spec.report.json_path),
        junit=absolute(junit or spec.report.junit),
        markdown=absolute(markdown or spec.report.markdown),
        patch=absolute(spec.output.patch),
    )
    remember(pid, outputs)
    async with open_runtime(quiet=True) as rt:
        finished = await start_or_find(rt.client, inp, workflow_id)
        # By id alone, so queries and the result follow the pipeline's latest run (it
        # continues as new), not the run this command started.
        handle = rt.client.get_workflow_handle(workflow_id, result_type=PipelineProgress)
        started = (
            f"tempi pipeline: {spec.name}: {shard_count(len(discovery.shards))} at {discovery.base_commit[:12]}, "
            f"workflow {workflow_id}" + (" (finished before; its result follows)" if finished else "")
        )
        print(started, file=sys.stderr if json_mode else sys.stdout, flush=True)
        if detach:
            print(
                f"detached: `tempi pipeline wait {workflow_id}` follows it and writes the reports", flush=True
            )
            return 0
        try:
            progress = await follow(handle, json_mode)
        except asyncio.CancelledError:  # Ctrl-C: this command stops following, not the pipeline
            print(
                f"\ntempi pipeline: stopped following {workflow_id}; the pipeline goes on (on the server, "
                f"while a worker runs). `tempi pipeline wait {workflow_id}` follows it again and writes "
                f"the reports; `tempi pipeline cancel {workflow_id}` stops it.",
                file=sys.stderr,
                flush=True,
            )
            raise
        except WorkflowFailureError as err:
            print(f"tempi pipeline: {spec.name} failed: {failure_cause(err)}", file=sys.stderr)
            return EXIT_USAGE
    print(
        json.dumps({"type": "summary", **json_summary(progress)}) if json_mode else summary_line(progress),
        flush=True,
    )
    if not json_mode:
        print(setup_report(progress) + final_verify_report(progress), end="", flush=True)
    write_outputs(progress, outputs)
    return exit_code(progress)
