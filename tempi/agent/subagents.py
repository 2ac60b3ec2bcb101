"""Subagents: agent definitions, the `task` tool the model calls, and how results read.

Pure code shared by the CLI (which loads definitions) and the workflow (which runs them).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError

from tempi.agent.base import PiModel
from tempi.agent.llm_context import ToolSpec
from tempi.agent.model_spec import ModelSpec
from tempi.agent.truncation import truncate_head

TASK_TOOL = "task"
MAX_PARALLEL_TASKS = 8
PARALLEL_CONCURRENCY = 4

DEFAULT_AGENT_PROMPT = (
    "You are a subagent of tempi, a coding agent. You were given one self-contained task by "
    "the main agent. Work on it with your tools, then answer with what you did and found, "
    "briefly and concretely: the main agent reads only your final answer."
)


class AgentDefinition(PiModel):
    """An agent the `task` tool can start: markdown with frontmatter, as in pi."""

    name: str
    description: str = ""
    tools: list[str] | None = None  # None: the parent's tools, without `task`
    model: ModelSpec | None = None  # None: the parent's model
    system_prompt: str = DEFAULT_AGENT_PROMPT
    source: str = "built-in"


BUILTIN_AGENTS = [
    AgentDefinition(
        name="worker",
        description="General-purpose agent with the same tools as you, for a self-contained piece of work.",
    )
]


class AgentFileError(ValueError):
    pass


def split_frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """YAML frontmatter fields (empty when absent or unreadable) and the body."""
    if not text.startswith("---"):
        return {}, text.strip()
    parts = text.split("---", 2)
    if len(parts) < 3:
        return {}, text.strip()
    import yaml  # on first use: the worker imports this module at start

    try:
        fields = yaml.safe_load(parts[1]) or {}
    except yaml.YAMLError:
        fields = {}
    return (fields if isinstance(fields, dict) else {}), parts[2].strip()


def parse_agent_markdown(text: str, source: str) -> tuple[dict[str, Any], str]:
    """Frontmatter fields and body of an agent file."""
    if not text.startswith("---"):
        raise AgentFileError(
            f"{source}: an agent file starts with a '---' frontmatter block (name, description)"
        )
    try:
        _, front, body = text.split("---", 2)
    except ValueError:
        raise AgentFileError(f"{source}: the frontmatter block is not closed with '---'") from None
    import yaml

    try:
        fields = yaml.safe_load(front) or {}
    except yaml.YAMLError as err:
        raise AgentFileError(f"{source}: frontmatter is not valid YAML: {err}") from err
    if not isinstance(fields, dict) or not fields.get("name"):
        raise AgentFileError(f"{source}: the frontmatter needs at least a `name`")
    return fields, body.strip()


class TaskItem(PiModel):
    agent: str = "worker"
    task: str


class TaskArgs(PiModel):
    """`{agent, task}` (single), `{tasks: [...]}` (parallel) or `{chain: [...]}` (chain)."""

    agent: str | None = None
    task: str | None = None
    tasks: list[TaskItem] | None = None
    chain: list[TaskItem] | None = None

    @property
    def mode(self) -> Literal["single", "parallel", "chain"]:
        if self.chain:
            return "chain"
        if self.tasks:
            return "parallel"
        return "single"

    def items(self) -> list[TaskItem]:
        if self.chain:
            return self.chain
        if self.tasks:
            return self.tasks
        return [TaskItem(agent=self.agent or "worker", task=self.task or "")]


def parse_task_args(args: Any, agents: list[AgentDefinition]) -> TaskArgs:
    """Validated arguments, or a ValueError whose message tells the model what to fix."""
    try:
        parsed = TaskArgs.model_validate(args)
    except ValidationError as err:
        raise ValueError(f"Invalid task arguments: {err.errors()[0]['msg']}") from err
    given = [bool(parsed.task), bool(parsed.tasks), bool(parsed.chain)]
    if sum(given) != 1:
        raise ValueError(
            "Give exactly one of: `task` (with optional `agent`), `tasks` (parallel) or `chain`."
        )
    if parsed.tasks and len(parsed.tasks) > MAX_PARALLEL_TASKS:
        raise ValueError(f"At most {MAX_PARALLEL_TASKS} parallel tasks per call.")
    known = {a.name for a in agents}
    for item in parsed.items():
        if item.agent not in known:
            raise ValueError(f"Unknown agent {item.agent!r}. Available: {', '.join(sorted(known))}.")
        if not item.task.strip():
            raise ValueError("A task must say what to do.")
    return parsed


def task_tool_spec(agents: list[AgentDefinition]) -> ToolSpec:
    listing = "\n".join(f"- {a.name}: {a.description}" for a in agents)
    item = {
        "type": "object",
        "properties": {
            "agent": {"type": "string", "description": "Agent name"},
            "task": {"type": "string", "description": "What the agent should do, self-contained"},
        },
        "required": ["agent", "task"],
    }
    return ToolSpec(
        name=TASK_TOOL,
        description=(
            "Hand work to subagents, each in its own session (and sandbox when the session has one). "
            "Modes: one `task` (with `agent`); `tasks` run in parallel; `chain` runs in order, with "
            "{previous} in a task replaced by the previous agent's answer. You get back each agent's "
            f"final answer.\nAgents:\n{listing}"
        ),
        parameters={
            "type": "object",
            "properties": {
                "agent": {"type": "string", "description": "Agent for a single task"},
                "task": {"type": "string", "description": "A single task"},
                "tasks": {"type": "array", "items": item, "description": "Tasks to run in parallel"},
                "chain": {"type": "array", "items": item, "description": "Tasks to run one after another"},
            },
        },
    )


class SubagentOutcome(PiModel):
    agent: str
    task: str
    session_id: str
    session_file: str
    text: str
    stop_reason: str
    error_message: str | None = None
    usage: dict[str, Any] = Field(default_factory=dict)
    patch: str | None = None


def format_task_result(mode: str, outcomes: list[SubagentOutcome]) -> tuple[str, bool]:
    """Text for the model (each answer truncated like a tool output) and whether it failed."""
    parts = []
    failed = False
    for i, o in enumerate(outcomes, 1):
        head = f"[{o.agent}]" if len(outcomes) == 1 else f"[{i}/{len(outcomes)} {o.agent}]"
        if o.stop_reason in ("error", "aborted"):
            failed = True
            parts.append(f"{head} failed ({o.stop_reason}): {o.error_message or 'no answer'}")
            continue
        kept = truncate_head(o.text)
        text = kept.content
        if kept.truncated:
            text += f"\n\n[Answer truncated; the full text is in the subagent's session {o.session_file}]"
        if o.patch:
            text += f"\n\n[The agent changed files in its sandbox; its patch:]\n{o.patch}"
        parts.append(f"{head}\n{text}")
    return "\n\n".join(parts), failed
