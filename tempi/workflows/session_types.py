"""The session workflow's configuration, carried state, prompts and views of its state; what
it and its activities pass each other, and the updates that run one, is in
`activity_payloads.py`.

Everything here crosses the history boundary, so it is pydantic and kept small: the
conversation itself lives in the session store (the claim-check rule in DESIGN.md).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from tempi.agent.base import PiModel
from tempi.agent.mcp_tools import McpToolList
from tempi.agent.messages import AssistantMessage, ImageContent, Usage, UserMessage
from tempi.agent.model_spec import ModelSpec, ThinkingLevel
from tempi.agent.subagents import AgentDefinition
from tempi.extensions.models import ExtensionSetup

QueueMode = Literal["one-at-a-time", "all"]
SandboxKind = Literal["local", "bwrap", "docker", "container"]
DEFAULT_SANDBOX_IMAGE = "tempi-sandbox:latest"
ErrorKind = Literal["retryable", "overflow", "fatal"]

SESSION_WORKFLOW = "AgentSessionWorkflow"
DEFAULT_TASK_QUEUE = "tempi"


def sandbox_creation_queue(task_queue: str) -> str:
    """The queue on which a session of `task_queue` asks for its docker sandbox: only workers
    that reach a Docker engine poll it (workers/worker.py)."""
    return f"{task_queue}-sandboxes"


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
    # A session waiting this long for a prompt closes (file flushed, sandbox removed; it
    # continues from its file later). None: a week, as before; 0: never.
    idle_close_s: float | None = Field(default=None, ge=0)


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
