"""Agent definitions for the `task` tool: markdown files with frontmatter in
`$TEMPI_HOME/agents/` and `<project>/.tempi/agents/` (the project's win on a name clash)."""

from __future__ import annotations

from pathlib import Path

from tempi.agent.model_registry import ModelRegistry
from tempi.agent.model_selection import ModelSelectionError, select_model
from tempi.agent.subagents import AgentDefinition, AgentFileError, parse_agent_markdown
from tempi.config.errors import ConfigError


def agent_dirs(home: Path, cwd: Path) -> list[Path]:
    return [home / "agents", cwd / ".tempi" / "agents"]


def load_agents(home: Path, cwd: Path, registry: ModelRegistry) -> list[AgentDefinition]:
    found: dict[str, AgentDefinition] = {}
    for folder in agent_dirs(home, cwd):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.md")):
            try:
                fields, body = parse_agent_markdown(path.read_text(encoding="utf-8"), str(path))
            except AgentFileError as err:
                raise ConfigError(str(err)) from err
            tools = fields.get("tools")
            if isinstance(tools, str):
                tools = [t.strip() for t in tools.split(",") if t.strip()]
            model = None
            if fields.get("model"):
                try:
                    model = select_model(registry, None, str(fields["model"])).model
                except ModelSelectionError as err:
                    raise ConfigError(f"{path}: {err}") from err
            found[str(fields["name"])] = AgentDefinition(
                name=str(fields["name"]),
                description=str(fields.get("description", "")),
                tools=tools,
                model=model,
                system_prompt=body or AgentDefinition.model_fields["system_prompt"].default,
                source=str(path),
            )
    return list(found.values())
