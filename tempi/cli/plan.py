"""From flags and settings to SessionOptions: model, thinking, tools and system prompt."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from temporalio.client import Client

from tempi.agent.model_registry import ModelRegistry
from tempi.agent.model_selection import ModelSelection, ModelSelectionError, select_model
from tempi.agent.prompt_templates import PromptTemplate
from tempi.agent.scoped_models import ScopedModel, scoped_models
from tempi.agent.skills import Skill, skills_prompt_section
from tempi.agent.subagents import TASK_TOOL, AgentDefinition
from tempi.agent.system_prompt import build_system_prompt
from tempi.agent.thinking_levels import DEFAULT_THINKING_LEVEL, clamp_level
from tempi.agent.tool_specs import ALL_TOOLS, DEFAULT_TOOLS
from tempi.cli.context_files import discover_context_files
from tempi.cli.errors import UserError
from tempi.cli.queue_pollers import other_workers
from tempi.cli.runtime import CLIENT_WORKER_ENV, runs_own_worker
from tempi.cli.trust_choice import Ask, settle_trust
from tempi.client.options import SessionOptions
from tempi.config.agents import load_agents
from tempi.config.api_keys import has_configured_key, set_runtime_api_key
from tempi.config.auth_json import auth_json_path
from tempi.config.enabled_models import enabled_patterns
from tempi.config.errors import ConfigError
from tempi.config.mcp_json import load_mcp_servers
from tempi.config.models_json import load_model_registry, registry_stamp
from tempi.config.paths import models_json_path, pi_agent_dir, tempi_home
from tempi.config.resources import load_prompt_templates, load_skills
from tempi.config.session_idle import idle_close_seconds
from tempi.config.settings import Settings, merged_settings
from tempi.extensions.discovery import discover_extensions, project_config_root
from tempi.extensions.loader import check_extensions
from tempi.workflows.session_types import (
    DEFAULT_SANDBOX_IMAGE,
    CompactionPolicy,
    RetryPolicySettings,
    SandboxKind,
)


def _models_stamp() -> tuple[Path, tuple[float | None, float | None]]:
    # auth.json too: a Copilot login (a /login made meanwhile) says where its models are.
    path = models_json_path()
    return path, registry_stamp(path)


@dataclass
class PlannedRun:
    # Kept current by the front ends (model, thinking), so a /new session starts like this one.
    options: SessionOptions
    loaded_registry: ModelRegistry
    settings: Settings
    templates: list[PromptTemplate] = field(default_factory=list)
    # What /skill:name expands, the flags (--skill, --no-skills) applied.
    skills: list[Skill] = field(default_factory=list)
    # --models: what Ctrl+P cycles through instead of every model with a key.
    scoped: list[ScopedModel] = field(default_factory=list)
    # The AGENTS.md/CLAUDE.md files in the system prompt, in its order (the startup header lists them).
    context_files: list[str] = field(default_factory=list)
    models_stamp: tuple[Path, tuple[float | None, float | None]] | None = None

    @property
    def registry(self) -> ModelRegistry:
        """The models as models.json (and auth.json) say now: like pi, a long-lived front end
        re-reads them when they changed (a broken edit keeps the last good models until it is fixed)."""
        stamp = _models_stamp()
        if stamp != self.models_stamp:
            try:
                self.loaded_registry = load_model_registry(stamp[0])
            except ConfigError as err:
                print(f"tempi: {err}", file=sys.stderr)
            self.models_stamp = stamp
        return self.loaded_registry


def text_or_file(value: str) -> str:
    """A flag value that is either the text itself or the path of a file holding it."""
    path = Path(value).expanduser()
    try:
        if len(value) < 4096 and path.is_file():
            return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"Cannot read {path}: {err}") from err
    return value


def _tools(args: argparse.Namespace, agents: list[AgentDefinition]) -> list[str]:
    """The session's tools; `task` joins the defaults when agent definitions exist."""
    if args.no_tools:
        return []
    if not args.tools:
        builtin = [] if args.no_builtin_tools else list(DEFAULT_TOOLS)
        return [*builtin, TASK_TOOL] if agents else builtin
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    known = (*ALL_TOOLS, TASK_TOOL)
    unknown = [t for t in tools if t not in known]
    if unknown:
        raise UserError(f"Unknown tool(s): {', '.join(unknown)}. Available: {', '.join(known)}")
    return tools


def apply_api_key(args: argparse.Namespace, provider: str) -> None:
    """Give --api-key to the worker this process runs (above auth.json, the environment and
    models.json, as in pi), or say why it cannot reach the worker that calls the model."""
    if not args.api_key:
        return
    if not runs_own_worker(args.no_worker):
        raise UserError(
            "--api-key only reaches a worker this process runs (with TEMPORAL_ADDRESS and "
            f"{CLIENT_WORKER_ENV}=1). Give the key to the worker that calls the model instead: for the "
            f"background server, `tempi server stop`, then put it in {auth_json_path()} "
            f'({{"{provider}": {{"type": "api_key", "key": "..."}}}}) or export the provider\'s variable.'
        )
    set_runtime_api_key(provider, args.api_key)


async def check_api_key_reach(args: argparse.Namespace, client: Client) -> None:
    """--api-key lives only in this process's environment, so a model call that another
    worker picks up would go out without it (or with that worker's key): refuse instead."""
    if not args.api_key:
        return
    others = await other_workers(client)
    if others:
        raise UserError(
            f"--api-key only reaches the worker in this process, but other workers also run model calls "
            f"for this Temporal server ({', '.join(sorted(others))}). Give the key to every worker "
            f"(its environment or {tempi_home() / 'models.json'}), or stop the others, instead of --api-key."
        )


def fixed_options(args: argparse.Namespace) -> list[str]:
    """Options the flags chose explicitly that a running session cannot change: resuming
    one with different values is refused rather than silently ignored."""
    return [
        name
        for name, chosen in (
            ("sandbox", args.sandbox is not None),
            ("tools", bool(args.tools or args.no_tools)),
        )
        if chosen
    ]


def check_user_container(name: str, cwd: Path) -> None:
    """`--sandbox container:NAME`: the container must run and mount the working directory
    before anything starts, so a typo or a stopped container is said now, not at the first
    tool call."""
    from tempi.activities.sandbox import SandboxError
    from tempi.activities.sandbox.user_container import find_user_container

    try:
        find_user_container(name, str(cwd))
    except SandboxError as err:
        raise UserError(f"--sandbox container:{name}: {err}") from None


def _outside_project(extensions: list[str], sandbox: str) -> list[str]:
    """A repository's own extensions are left out under a sandbox: they would run on the host,
    where the sandbox is meant to keep the repository out."""
    kept = []
    for path in extensions:
        if project_config_root(Path(path)) is None:
            kept.append(path)
        else:
            print(
                f"tempi: extension {path} is the repository's own and would run on the host, outside "
                f"--sandbox {sandbox}; it is left out (put it in {tempi_home() / 'extensions'} to run it there)",
                file=sys.stderr,
            )
    return kept


def plan_run(
    args: argparse.Namespace,
    cwd: Path,
    *,
    ask_trust: Ask | None = None,
    reloading: bool = False,
    one_shot: bool = False,
) -> PlannedRun:
    """`ask_trust` asks the person at the terminal whether to trust the repository's `.tempi/`
    (the interactive mode); without it only `--trust` or an earlier trust counts. `reloading`
    (`/reload`) keeps what was settled at the start and says nothing on the terminal.
    `one_shot`: a run that prints its answer and exits (`-p`, `--mode json`)."""
    if not reloading:
        settle_trust(getattr(args, "trust", None), cwd, ask=ask_trust)
    try:
        saved = merged_settings(cwd)
        settings = Settings.model_validate(saved)
        models_stamp = _models_stamp()
        registry = load_model_registry(models_stamp[0])
        provider_with_key = args.provider if args.api_key else None
        # --models, else the saved /scoped-models choice (which does not pick the first model).
        scoped = (
            scoped_models(registry, args.models)
            if args.models
            else scoped_models(registry, enabled_patterns(saved), strict=False)
        )
        if args.models and scoped and not (args.model or args.provider):
            # pi starts on the first of the --models.
            selection = ModelSelection(model=scoped[0].model, thinking_level=scoped[0].thinking_level)
        else:
            selection = select_model(
                registry,
                args.provider,
                args.model,
                default_provider=settings.default_provider,
                default_model=settings.default_model,
                key_available=lambda p: p == provider_with_key or has_configured_key(p, registry),
            )
    except (ModelSelectionError, ConfigError) as err:
        raise UserError(str(err)) from err
    if selection.warning:
        print(f"tempi: {selection.warning}", file=sys.stderr)
    apply_api_key(args, selection.model.provider)
    try:
        agents = load_agents(tempi_home(), cwd, registry)
    except ConfigError as err:
        raise UserError(str(err)) from err
    kind, _, detail = (args.sandbox or "local").partition(":")
    try:
        # A broken mcp.json is reported now, naming the file, rather than by the worker later.
        servers = load_mcp_servers(cwd)
    except ConfigError as err:
        raise UserError(str(err)) from err
    for server in servers.values():
        if server.project and server.transport == "stdio" and kind != "local":
            print(
                f"tempi: MCP server {server.name!r} from {server.source} runs a command, which would run on "
                f"the host, outside --sandbox {kind}; it is not started",
                file=sys.stderr,
            )
    extensions = discover_extensions(cwd, args.extension, discover=not args.no_extensions)
    if kind != "local":
        extensions = _outside_project(extensions, kind)
    for problem in check_extensions(extensions):
        # A broken extension is not fatal: the session runs without it.
        print(f"tempi: {problem.error}; the session goes on without it", file=sys.stderr)
        extensions.remove(problem.extension)
    tools = _tools(args, agents)
    # pi's default is "medium", clamped to what the model accepts ("off" for one that cannot think).
    thinking = clamp_level(
        selection.model,
        args.thinking
        or selection.thinking_level
        or settings.default_thinking_level
        or DEFAULT_THINKING_LEVEL,
    )
    skills = load_skills(
        tempi_home(), cwd, pi_home=pi_agent_dir(), paths=args.skill, discover=not args.no_skills
    )
    context = [] if args.no_context_files else discover_context_files(cwd, tempi_home(), pi_agent_dir())
    prompt = build_system_prompt(
        tools=tools,
        cwd=str(cwd),
        today=time.strftime("%Y-%m-%d"),
        custom_prompt=text_or_file(args.system_prompt) if args.system_prompt else None,
        append=[text_or_file(a) for a in args.append_system_prompt],
        context_files=context,
        skills=skills_prompt_section(skills) if "read" in tools else "",
    )
    retry = settings.retry
    if kind == "container":
        check_user_container(detail, cwd)
    try:
        idle_close_s = idle_close_seconds(settings, one_shot=one_shot)
    except ConfigError as err:
        raise UserError(str(err)) from err
    options = SessionOptions(
        cwd=str(cwd),
        model=selection.model,
        thinking_level=thinking,
        system_prompt=prompt,
        tools=tools,
        retry=RetryPolicySettings(
            enabled=retry.enabled,
            max_retries=retry.max_retries,
            base_delay_ms=retry.base_delay_ms,
            max_delay_ms=retry.max_delay_ms,
        ),
        steering_mode=settings.steering_mode,
        follow_up_mode=settings.follow_up_mode,
        agents=agents,
        extensions=extensions,
        sandbox=cast(SandboxKind, kind),  # args.py accepts only the kinds
        sandbox_image=detail if kind == "docker" and detail else DEFAULT_SANDBOX_IMAGE,
        sandbox_container=detail if kind == "container" else None,
        compaction=CompactionPolicy(
            enabled=settings.compaction.enabled,
            reserve_tokens=settings.compaction.reserve_tokens,
            keep_recent_tokens=settings.compaction.keep_recent_tokens,
        ),
        idle_close_s=idle_close_s,
    )
    return PlannedRun(
        options=options,
        loaded_registry=registry,
        models_stamp=models_stamp,
        settings=settings,
        skills=skills,
        templates=load_prompt_templates(
            tempi_home(),
            cwd,
            pi_home=pi_agent_dir(),
            paths=args.prompt_template,
            discover=not args.no_prompt_templates,
        ),
        scoped=scoped,
        context_files=[c.path for c in context],
    )
