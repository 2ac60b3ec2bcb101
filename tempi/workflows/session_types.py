"""Inputs, outputs and carried state of the session workflow and its activities.

Everything here crosses the history boundary, so it is pydantic and kept small: the
conversation itself lives in the session store (the claim-check rule in DESIGN.md).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from tempi.agent.base import PiModel
from tempi.agent.llm_context import ToolSpec
from tempi.agent.mcp_tools import McpTool, McpToolList
from tempi.agent.messages import (
    AssistantMessage,
    ImageContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from tempi.agent.model_spec import ModelSpec, ThinkingLevel
from tempi.agent.subagents import AgentDefinition
from tempi.extensions.models import (
    ExtensionEffects,
    ExtensionProblem,
    ExtensionSetup,
    ExtensionTool,
    InjectedMessage,
)

QueueMode = Literal["one-at-a-time", "all"]
SandboxKind = Literal["local", "bwrap", "docker", "container"]
DEFAULT_SANDBOX_IMAGE = "tempi-sandbox:latest"
ErrorKind = Literal["retryable", "overflow", "fatal"]

SESSION_WORKFLOW = "AgentSessionWorkflow"
DEFAULT_TASK_QUEUE = "tempi"


def workflow_id_for(session_id: str) -> str:
    return f"session-{session_id}"


class RetryPolicySettings(PiModel):
    enabled: bool = True
    max_retries: int = 3
    base_delay_ms: int = 2000
    max_delay_ms: int = 60_000


class CompactionPolicy(PiModel):
    enabled: bool = True
    reserve_tokens: int = 16_384
    keep_recent_tokens: int = 20_000


class SessionConfig(PiModel):
    """What a session is started with; changes later arrive as signals."""

    session_id: str
    session_path: str
    cwd: str
    model: ModelSpec
    thinking_level: ThinkingLevel = "off"
    system_prompt: str = ""
    tools: list[str] = Field(default_factory=list)
    # Every tool takes a `label` for people (mom's tools do; `tempi slack` shows it).
    tool_labels: bool = False
    tool_execution: Literal["parallel", "sequential"] = "parallel"
    sandbox: SandboxKind = "local"
    sandbox_image: str = DEFAULT_SANDBOX_IMAGE
    sandbox_network: bool = False
    # sandbox "container": the name of the user's own container the tools run in.
    sandbox_container: str | None = None
    # A sandbox host that picks nothing up for this long is taken to be gone.
    sandbox_pickup_s: float = 60.0
    # A subagent's docker sandbox works on a copy of this folder and returns a patch.
    workspace_copy_from: str | None = None
    steering_mode: QueueMode = "one-at-a-time"
    follow_up_mode: QueueMode = "one-at-a-time"
    retry: RetryPolicySettings = Field(default_factory=RetryPolicySettings)
    compaction: CompactionPolicy = Field(default_factory=CompactionPolicy)
    parent_session: str | None = None
    agents: list[AgentDefinition] = Field(default_factory=list)  # what the `task` tool can start
    created_at: str | None = None  # the header's ISO timestamp
    # Start a fresh file (header + model/thinking entries) or continue an existing one.
    resume_leaf_id: str | None = None
    existing_file: bool = False
    # Past this many history events a run continues as new at the next prompt or turn boundary.
    history_event_budget: int = 20_000
    history_bytes_budget: int = 8_000_000
    # An mcp.json was found: the session lists its servers' tools when it starts.
    mcp: bool = False
    # Python extensions (absolute paths to their modules), loaded by the workers.
    extensions: list[str] = Field(default_factory=list)


class SessionStats(PiModel):
    user_messages: int = 0
    assistant_messages: int = 0
    tool_calls: int = 0
    tool_results: int = 0
    usage: Usage = Field(default_factory=Usage)


class SandboxRef(PiModel):
    container_id: str
    task_queue: str  # the queue of the worker on the container's host


class RunHandoff(PiModel):
    """A run that continued as new between two of its turns, and what its next turn needs."""

    run_start_offset: int  # where the run's agent_start sits in the global event log
    overflow_compacted: bool = False
    last_good: AssistantMessage | None = None


class CarriedState(PiModel):
    """What survives continue-as-new."""

    sandbox: SandboxRef | None = None
    leaf_id: str | None = None
    file_started: bool = False
    model: ModelSpec
    thinking_level: ThinkingLevel
    steering_mode: QueueMode
    follow_up_mode: QueueMode
    session_name: str | None = None
    stats: SessionStats = Field(default_factory=SessionStats)
    steering: list[UserMessage] = Field(default_factory=list)
    follow_up: list[UserMessage] = Field(default_factory=list)
    prompts: list[UserMessage] = Field(default_factory=list)
    event_offset: int = 0
    # The end of the previous run's event log, so watchers a little behind miss nothing.
    recent_events: list[dict[str, Any]] = Field(default_factory=list)
    last_assistant_text: str | None = None
    message_count: int = 0
    runs: int = 0
    handoff: RunHandoff | None = None
    entry_id_seed: int | None = None
    entry_ids_made: int = 0
    # The MCP tools listed when the session started (None: not listed yet).
    mcp_tools: McpToolList | None = None
    # What the extensions registered, loaded when the session started (None: not yet).
    extension_setup: ExtensionSetup | None = None
    # The system prompt the extensions' before_agent_start gave the run numbered
    # `extension_prompt_run` (None: the configured one).
    extension_system_prompt: str | None = None
    extension_prompt_run: int = 0
    # The index of the run's next turn, and the run's first entry (its prompt): what the
    # extensions' turn and agent_end handlers are told.
    extension_turn: int = 0
    extension_run_entry: str | None = None


class SessionInput(PiModel):
    config: SessionConfig
    carried: CarriedState | None = None


class PromptRequest(PiModel):
    message: str
    images: list[ImageContent] = Field(default_factory=list)
    streaming_behavior: Literal["steer", "followUp"] | None = None
    # Text user messages that join the context ahead of this one, each its own message and
    # without a model call of its own (mom's channel-log lines the session has not seen).
    # Only with a prompt that starts a run.
    before: list[str] = Field(default_factory=list)


class EventsPage(PiModel):
    """A slice of the workflow's event log; offsets are global across continue-as-new."""

    base_offset: int
    next_offset: int
    events: list[dict[str, Any]]
    is_streaming: bool


class SessionStateView(PiModel):
    session_id: str
    session_file: str
    cwd: str
    model: ModelSpec
    thinking_level: ThinkingLevel
    is_streaming: bool
    is_compacting: bool = False
    steering_mode: QueueMode
    follow_up_mode: QueueMode
    session_name: str | None = None
    auto_compaction_enabled: bool = True
    message_count: int
    pending_message_count: int
    stats: SessionStats
    last_assistant_text: str | None = None
    runs: int = 0
    leaf_id: str | None = None
    auto_retry_enabled: bool = True


# --- activity payloads -------------------------------------------------------------


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


class LlmCallResult(PiModel):
    message: AssistantMessage
    error_kind: ErrorKind | None = None
    retry_after_ms: int | None = None
    # The extensions' turn handlers that failed, and what they asked of the session.
    problems: list[ExtensionProblem] = Field(default_factory=list)
    effects: ExtensionEffects | None = None


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
