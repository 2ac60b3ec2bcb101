"""What a session is started with, before it has an id or a file, and how that becomes
the workflow's input for a new session or for one that continues a file."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import Field

from tempi.agent.base import PiModel
from tempi.agent.model_spec import ModelSpec, ThinkingLevel
from tempi.agent.subagents import AgentDefinition
from tempi.agent.thinking_levels import clamp_level
from tempi.client.forking import iso_now
from tempi.config.mcp_json import mcp_configured
from tempi.extensions.discovery import discover_extensions
from tempi.store.catalog import session_file_name
from tempi.store.loading import LoadedSession
from tempi.workflows.session_types import (
    DEFAULT_SANDBOX_IMAGE,
    CompactionPolicy,
    QueueMode,
    RetryPolicySettings,
    SandboxKind,
    SessionConfig,
)

# A registry lookup (provider, model id) for continuing a file with the model it used.
FindModel = Callable[[str, str], ModelSpec | None]


class SessionOptions(PiModel):
    """Everything about a session a caller chooses; SessionConfig adds its identity (id,
    file, creation time) and where it continues from. Defaults are SessionConfig's."""

    cwd: str
    model: ModelSpec
    thinking_level: ThinkingLevel = "off"
    system_prompt: str = ""
    tools: list[str] = Field(default_factory=list)
    tool_labels: bool = False
    tool_execution: Literal["parallel", "sequential"] = "parallel"
    sandbox: SandboxKind = "local"
    sandbox_image: str = DEFAULT_SANDBOX_IMAGE
    sandbox_network: bool = False
    sandbox_container: str | None = None
    sandbox_pickup_s: float = 60.0
    steering_mode: QueueMode = "one-at-a-time"
    follow_up_mode: QueueMode = "one-at-a-time"
    retry: RetryPolicySettings = Field(default_factory=RetryPolicySettings)
    compaction: CompactionPolicy = Field(default_factory=CompactionPolicy)
    agents: list[AgentDefinition] = Field(default_factory=list)
    history_event_budget: int = 20_000
    history_bytes_budget: int = 8_000_000
    # How long the session waits for a prompt before it closes (tempi.config.session_idle).
    idle_close_s: float | None = None
    # MCP servers' tools: None offers them when an mcp.json is found (tempi's home or the
    # project's .tempi/), False never.
    mcp: bool | None = None
    # Python extensions (absolute paths): None uses those found in tempi's home and the
    # project's .tempi/extensions/.
    extensions: list[str] | None = None

    def fields(self) -> dict[str, object]:
        # Attribute values as they are (models stay models), for SessionConfig's constructor.
        return {name: getattr(self, name) for name in type(self).model_fields}

    def mcp_for(self, cwd: str) -> bool:
        return self.mcp if self.mcp is not None else mcp_configured(Path(cwd))

    def extensions_for(self, cwd: str) -> list[str]:
        return self.extensions if self.extensions is not None else discover_extensions(Path(cwd), [])


def new_config(
    options: SessionOptions,
    store_path: Callable[[str, str], Path],
    *,
    session_dir: Path | None = None,
    session_file: Path | None = None,
    parent_session: str | None = None,
) -> SessionConfig:
    """A fresh session: a new id and file. The file is `session_file` when given (pi's
    `--session NEW.jsonl`), else named after the session in `session_dir`, else placed by
    `store_path(session_id, created)`. The thinking level is clamped to the model, as pi
    does when it creates a session."""
    session_id = str(uuid.uuid4())
    created = iso_now()
    if session_file is not None:
        path = session_file
    elif session_dir is not None:
        path = session_dir / session_file_name(session_id, created)
    else:
        path = store_path(session_id, created)
    return SessionConfig.model_validate(
        {
            **options.fields(),
            "thinking_level": clamp_level(options.model, options.thinking_level),
            "session_id": session_id,
            "session_path": str(path),
            "created_at": created,
            "parent_session": parent_session,
            "mcp": options.mcp_for(options.cwd),
            "extensions": options.extensions_for(options.cwd),
        }
    )


def resumed_config(
    options: SessionOptions,
    loaded: LoadedSession,
    path: Path,
    *,
    override_model: bool,
    find_model: FindModel | None,
) -> SessionConfig:
    """A session that continues `loaded` at its leaf, in the file's own directory and,
    unless `override_model`, with the file's model (when `find_model` knows it) and level."""
    context = loaded.tree.build_context(loaded.tree.leaf_id)
    model, thinking = options.model, options.thinking_level
    if not override_model and context.model_id and context.provider:
        restored = find_model(context.provider, context.model_id) if find_model else None
        if restored is not None:
            model = restored
        if context.thinking_level:
            thinking = context.thinking_level
    return SessionConfig.model_validate(
        {
            **options.fields(),
            "cwd": loaded.header.cwd or options.cwd,
            "model": model,
            "thinking_level": thinking,
            "session_id": loaded.header.id,
            "session_path": str(path),
            "resume_leaf_id": loaded.tree.leaf_id,
            "existing_file": True,
            "mcp": options.mcp_for(loaded.header.cwd or options.cwd),
            "extensions": options.extensions_for(loaded.header.cwd or options.cwd),
        }
    )
