"""What the session workflow and its activities pass each other: each activity's input and
result, and the payloads of the workflow's updates that run one (bash, compaction,
navigation, the sandbox's lifetime).

Everything here crosses the history boundary, so it is pydantic and kept small: the
conversation itself lives in the session store (the claim-check rule in DESIGN.md).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from tempi.agent.base import PiModel
from tempi.agent.llm_context import ToolSpec
from tempi.agent.mcp_tools import McpTool
from tempi.agent.messages import AssistantMessage, ToolCall, ToolResultMessage, Usage
from tempi.agent.model_spec import ModelSpec, ThinkingLevel
from tempi.extensions.models import ExtensionEffects, ExtensionProblem, ExtensionTool, InjectedMessage
from tempi.workflows.session_types import CompactionPolicy, ErrorKind, SandboxKind, SessionInput


class OutboxItem(PiModel):
    """An entry waiting to be written: inline (small, made by the workflow) or a reference
    to a result blob a tool activity already stored (so big results cross history once)."""

    entry: dict[str, Any] | None = None
    pending_id: str | None = None


class SessionFileRef(PiModel):
    session_id: str
    session_path: str
    cwd: str
    sandbox: SandboxKind = "local"
    container_id: str | None = None  # the docker sandbox, once it exists
    container_name: str | None = None  # sandbox "container": the user's container
    parent_session: str | None = None
    header_timestamp: str | None = None
    existing_file: bool = False


class LlmCallInput(PiModel):
    file: SessionFileRef
    outbox: list[OutboxItem] = Field(default_factory=list)
    leaf_id: str | None
    entry_id: str
    entry_timestamp: str
    model: ModelSpec
    thinking_level: ThinkingLevel
    system_prompt: str
    tools: list[str]
    extra_tools: list[ToolSpec] = Field(default_factory=list)  # specs the workflow owns (task)
    tool_labels: bool = False
    extensions: list[str] = Field(default_factory=list)  # their turn and context hooks run
    turn_index: int = 0  # the run's turn this call starts; turn_end of the one before runs first
    # Entry ids for the results of an answer whose tool calls only read (read, ls): the
    # activity runs them itself and parks their results under these ids, in order. Empty:
    # the workflow runs every tool call.
    early_read_ids: list[str] = Field(default_factory=list)


class LlmCallResult(PiModel):
    message: AssistantMessage
    error_kind: ErrorKind | None = None
    retry_after_ms: int | None = None
    # The extensions' turn handlers that failed, and what they asked of the session.
    problems: list[ExtensionProblem] = Field(default_factory=list)
    effects: ExtensionEffects | None = None
    # The answer's tool calls the activity ran (early_read_ids), in call order; empty when
    # it ran none.
    early_results: list[ToolCallResult] = Field(default_factory=list)


class ToolCallInput(PiModel):
    file: SessionFileRef
    tool_call: ToolCall
    entry_id: str
    parent_id: str
    entry_timestamp: str
    timestamp_ms: int
    extensions: list[str] = Field(default_factory=list)  # their tool_call/tool_result hooks run


class ExtensionSetupInput(PiModel):
    extensions: list[str]
    file: SessionFileRef | None = None  # the session session_start handlers run for


class ExtensionCallInput(PiModel):
    file: SessionFileRef
    tool: ExtensionTool
    tool_call: ToolCall
    entry_id: str
    parent_id: str
    entry_timestamp: str
    timestamp_ms: int
    extensions: list[str]


class AgentStartInput(PiModel):
    file: SessionFileRef
    extensions: list[str]
    prompt: str
    system_prompt: str


class AgentStartResult(PiModel):
    system_prompt: str
    problems: list[ExtensionProblem] = Field(default_factory=list)
    effects: ExtensionEffects | None = None
    messages: list[InjectedMessage] = Field(default_factory=list)


class AgentEndInput(PiModel):
    file: SessionFileRef  # written up to `leaf_id`
    extensions: list[str]
    leaf_id: str | None
    run_entry_id: str | None  # the run's first entry: agent_end gets the messages from there
    last_turn: int  # whose turn_end runs first (-1: none)


class AgentEndResult(PiModel):
    problems: list[ExtensionProblem] = Field(default_factory=list)
    effects: ExtensionEffects | None = None


class McpListInput(PiModel):
    cwd: str  # the session's: the project's .tempi/mcp.json is found from it
    sandbox: SandboxKind = "local"  # a repository's stdio servers are refused under a sandbox


class McpCallInput(PiModel):
    file: SessionFileRef
    tool: McpTool
    tool_call: ToolCall
    entry_id: str
    parent_id: str
    entry_timestamp: str
    timestamp_ms: int
    extensions: list[str] = Field(default_factory=list)  # their tool_call/tool_result hooks run


class ToolCallResult(PiModel):
    message: ToolResultMessage
    sandbox_lost: bool = False  # the container is gone; the next tool call starts a fresh one
    effects: ExtensionEffects | None = None  # what extension code asked of the session


class BriefToolRun(PiModel):
    """A tool call's first moments inside the workflow task: its result when it ended in
    them, else the queue of the worker it goes on running on."""

    result: ToolCallResult | None = None
    running_on: str | None = None


class FlushInput(PiModel):
    file: SessionFileRef
    outbox: list[OutboxItem]
    finished_live_keys: list[str] = Field(default_factory=list)


class BashRequest(PiModel):
    """A user-run shell command (`!cmd`, RPC `bash`); its output joins the context."""

    command: str
    exclude_from_context: bool = False


class BashResult(PiModel):
    output: str
    exit_code: int | None
    cancelled: bool = False
    truncated: bool = False
    full_output_path: str | None = None


class DequeueRequest(PiModel):
    """Take back the messages queued for the run (pi's Alt+Up); with `abort`, also stop the
    run (pi's Esc), so nothing queued fires after it."""

    abort: bool = False


class QueuedMessages(PiModel):
    """The texts taken back from the queues, in pi's order: steering, then follow-ups."""

    steering: list[str] = Field(default_factory=list)
    follow_up: list[str] = Field(default_factory=list)

    def all(self) -> list[str]:
        return [*self.steering, *self.follow_up]


class CompactRequest(PiModel):
    custom_instructions: str | None = None


class CompactResult(PiModel):
    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: dict[str, Any] | None = None


class CompactInput(PiModel):
    file: SessionFileRef
    outbox: list[OutboxItem] = Field(default_factory=list)
    leaf_id: str | None
    model: ModelSpec
    thinking_level: ThinkingLevel
    policy: CompactionPolicy
    custom_instructions: str | None = None
    entry_id: str
    entry_timestamp: str
    reason: Literal["manual", "threshold", "overflow"]
    extensions: list[str] = Field(default_factory=list)  # their session_before_compact hooks run


class CompactActivityResult(PiModel):
    """A failed or empty compaction is an answer, not an activity failure: retrying
    would ask the model the same question again."""

    outcome: CompactResult | None = None
    error: str | None = None
    aborted: bool = False
    problems: list[ExtensionProblem] = Field(default_factory=list)  # extensions' hooks that failed


class UserBashInput(PiModel):
    file: SessionFileRef
    command: str


class SubagentInput(PiModel):
    session: SessionInput
    task: str


class SubagentResult(PiModel):
    text: str
    stop_reason: str
    error_message: str | None = None
    usage: Usage = Field(default_factory=Usage)
    session_file: str
    patch: str | None = None


class NavigateRequest(PiModel):
    """Move the session's leaf to another point of its tree (pi's /tree)."""

    target_id: str
    new_leaf_id: str | None  # the target, or its parent when a user message is re-edited
    summarize: bool = False
    custom_instructions: str | None = None


class NavigateResult(PiModel):
    leaf_id: str | None
    branch_summary_id: str | None = None
    summary: str | None = None


class BranchSummaryInput(PiModel):
    file: SessionFileRef
    old_leaf_id: str | None
    target_id: str
    new_leaf_id: str | None
    model: ModelSpec
    thinking_level: ThinkingLevel
    entry_id: str
    entry_timestamp: str
    custom_instructions: str | None = None


class BranchSummaryResult(PiModel):
    entry_id: str | None = None
    summary: str | None = None
    error: str | None = None


class SandboxCreateInput(PiModel):
    session_id: str
    session_path: str
    image: str
    workspace: str  # host folder mounted at /workspace
    copy_from: str | None = None
    network: bool = False
    # Set: find this container of the user's instead of making one.
    container: str | None = None


class SandboxCreated(PiModel):
    container_id: str
    task_queue: str
    workspace: str


class SandboxFinishInput(PiModel):
    session_id: str
    container_id: str
    want_patch: bool = False


class SandboxFinished(PiModel):
    patch: str | None = None
