"""MCP servers a user configured: `mcp.json` in tempi's home and `.tempi/mcp.json` in the
project, in the common `mcpServers` format (a stdio server has `command`/`args`/`env`/`cwd`,
a streamable-HTTP one `url`/`headers`). A project server replaces a home server of the same
name.

Values may name environment variables (`${TOKEN}`, `${TOKEN:-default}`). They are resolved
by `resolve_server` on the worker that connects, so a secret stays in the file or the
worker's environment and never reaches a session's history."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tempi.config.errors import ConfigError, describe_validation_error, read_json_object, read_text
from tempi.config.paths import PROJECT_CONFIG_DIR, expand_path, tempi_home
from tempi.config.project_trust import project_trusted

MCP_JSON = "mcp.json"
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


class McpServerEntry(BaseModel):
    """One server as written in the file, variables unresolved."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    # Some files say which transport; tempi tells it from command/url.
    type: Literal["stdio", "http", "streamable-http", "streamableHttp"] | None = None
    disabled: bool = False

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerEntry:
        if bool(self.command) == bool(self.url):
            raise ValueError("give either `command` (a stdio server) or `url` (a streamable-HTTP server)")
        return self


class McpServer(BaseModel):
    """A configured server: its entry and the file (and its base directory) it came from."""

    name: str
    entry: McpServerEntry
    source: str
    base_dir: str
    # From the repository's .tempi/mcp.json: used only when the project is trusted, and its
    # ${VAR}s are filled only from what the tools may see, never the owner's secrets.
    project: bool = False

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.entry.command else "http"

    def describe(self) -> str:
        """Where the server is, without any value that might be a secret."""
        if self.entry.command:
            return f"stdio: {self.entry.command} {' '.join(self.entry.args)}".rstrip()
        return f"http: {self.entry.url}"


class ResolvedServer(BaseModel):
    """A server with its variables filled in: for the worker's memory only."""

    name: str
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)


def home_mcp_path() -> Path:
    return tempi_home() / MCP_JSON


def project_mcp_path(cwd: Path) -> Path:
    return cwd / PROJECT_CONFIG_DIR / MCP_JSON


def load_mcp_servers(cwd: Path) -> dict[str, McpServer]:
    """The servers of both files, enabled ones only; a project server replaces a home one.
    The project's file counts only while the owner trusts the project as it is now."""
    servers: dict[str, McpServer] = {}
    sources = [(home_mcp_path(), tempi_home(), False)]
    if project_mcp_untrusted(cwd) is False:
        sources.append((project_mcp_path(cwd), cwd, True))
    for path, base, project in sources:
        for server in _read_file(path, base, project):
            servers[server.name] = server
    return {name: s for name, s in servers.items() if not s.entry.disabled}


def project_mcp_untrusted(cwd: Path) -> bool | None:
    """None: the project has no mcp.json; True: it has one its owner has not trusted."""
    if not project_mcp_path(cwd).is_file():
        return None
    return not project_trusted(cwd)


def mcp_configured(cwd: Path) -> bool:
    """Whether a file the session may use exists; a session then lists MCP tools when it starts."""
    return home_mcp_path().is_file() or project_mcp_untrusted(cwd) is False


def _read_file(path: Path, base: Path, project: bool) -> list[McpServer]:
    if not path.is_file():
        return []
    data = read_json_object(path, read_text(path, "MCP config"), "MCP config")
    raw = data.get("mcpServers")
    if raw is None:
        raise ConfigError(
            f'MCP config {path} has no "mcpServers" object; write {{"mcpServers": {{"name": {{...}}}}}}'
        )
    if not isinstance(raw, dict):
        raise ConfigError(f'MCP config {path}: "mcpServers" must be an object of servers by name')
    servers = []
    for name, value in raw.items():
        if not _SERVER_NAME.match(name):
            raise ConfigError(
                f"MCP config {path}: server name {name!r} may hold only letters, digits, '_' and '-' "
                "(it becomes part of tool names)"
            )
        try:
            entry = McpServerEntry.model_validate(value)
        except ValidationError as err:
            raise ConfigError(
                f"MCP config {path}: server {name!r}:\n{describe_validation_error(err)}"
            ) from None
        servers.append(
            McpServer(name=name, entry=entry, source=str(path), base_dir=str(base), project=project)
        )
    return servers


WORKER_ENV = "the worker's environment"


def expand(
    value: str, where: str, env_label: str = WORKER_ENV, visible: Mapping[str, str] | None = None
) -> str:
    """`${NAME}` and `${NAME:-default}` filled from the environment; a missing variable
    without a default is an error naming it and where it is used. With `visible` (a
    repository's file) only those names are filled: one the owner has but did not allow is
    an error, whatever its default, so a repository cannot take a secret by naming it."""
    env = os.environ if visible is None else visible

    def fill(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if visible is not None and name in os.environ:
            raise ConfigError(
                f"{where} uses ${{{name}}}: a repository's mcp.json may use only variables the tools "
                f"see (TEMPI_TOOL_ENV names more), never the owner's secrets; to give a server a "
                f"secret, configure it in {home_mcp_path()}"
            )
        if default is not None:
            return default
        raise ConfigError(f"{where} uses ${{{name}}}, which is not set in {env_label}")

    return _VAR.sub(fill, value)


def resolve_server(
    server: McpServer,
    session_cwd: Path,
    env_label: str = WORKER_ENV,
    project_env: Mapping[str, str] | None = None,
) -> ResolvedServer:
    """`env_label` says whose environment the variables come from, for the error;
    `project_env` is what a project server's variables may be filled from (the tools'
    environment; none when not given)."""
    e = server.entry
    at = f"MCP server {server.name!r} ({server.source})"
    visible = (project_env if project_env is not None else {}) if server.project else None

    def expand_vars(value: str, where: str) -> str:
        return expand(value, where, env_label, visible)

    cwd = expand_path(expand_vars(e.cwd, f"{at} cwd"), Path(server.base_dir)) if e.cwd else session_cwd
    return ResolvedServer(
        name=server.name,
        command=expand_vars(e.command, f"{at} command") if e.command else None,
        args=[expand_vars(a, f"{at} args") for a in e.args],
        env={k: expand_vars(v, f"{at} env.{k}") for k, v in e.env.items()},
        cwd=str(cwd),
        url=expand_vars(e.url, f"{at} url") if e.url else None,
        headers={k: expand_vars(v, f"{at} headers.{k}") for k, v in e.headers.items()},
    )
