"""mom's system prompt for one channel, rebuilt before every run so that what the agent
wrote to MEMORY.md or skills/ last time is what it knows this time. Built in memory and
handed to the session; never written to disk (mom dumped it to last_prompt.jsonl)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from tempi.agent.skills import Skill, parse_skill, skills_prompt_section
from tempi.workflows.slack_text import quote_name

NO_MEMORY = "(no working memory yet)"


class SlackUser(BaseModel):
    id: str
    name: str
    display_name: str = ""


class SlackChannel(BaseModel):
    id: str
    name: str


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except (FileNotFoundError, IsADirectoryError, UnicodeDecodeError):
        return ""


def memory_section(working_dir: Path, channel: str) -> str:
    """The workspace's MEMORY.md, then the channel's, each under its own heading."""
    parts = []
    shared = _read(working_dir / "MEMORY.md")
    if shared:
        parts.append(f"### Global Workspace Memory\n{shared}")
    own = _read(working_dir / channel / "MEMORY.md")
    if own:
        parts.append(f"### Channel-Specific Memory\n{own}")
    return "\n\n".join(parts) or NO_MEMORY


def channel_skills(working_dir: Path, channel: str) -> list[Skill]:
    """Workspace skills, then the channel's, a channel skill winning over one of the same name."""
    found: dict[str, Skill] = {}
    for folder in (working_dir / "skills", working_dir / channel / "skills"):
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("SKILL.md")):
            if any(part.startswith(".") for part in path.relative_to(folder).parts[:-1]):
                continue
            skill = parse_skill(_read(path), str(path), path.parent.name)
            if skill is not None:
                found[skill.name] = skill
    return list(found.values())


def local_zone_name() -> str:
    """The IANA name of the host's zone, which periodic events should name."""
    configured = os.environ.get("TZ", "").lstrip(":")
    if "/" in configured or configured == "UTC":
        return configured
    try:
        target = os.path.realpath("/etc/localtime")
    except OSError:
        return "UTC"
    marker = "zoneinfo/"
    return target.split(marker, 1)[1] if marker in target else "UTC"


def _environment(sandbox: str, cwd: str) -> str:
    if sandbox == "container":
        return (
            "Your commands run in a long-lived Docker container that keeps what you install.\n"
            "- Install what you need with the container's package manager; record it in SYSTEM.md"
        )
    if sandbox == "docker":
        return (
            "Your commands run in a Docker container.\n"
            "- Install what you need with the container's package manager; record it in SYSTEM.md"
        )
    if sandbox == "bwrap":
        return (
            f"Your commands run in a bubblewrap sandbox without network; only {cwd} is writable.\n"
            "- Be careful with system modifications"
        )
    return f"Your commands run directly on the host.\n- Bash working directory: {cwd}\n- Be careful with system modifications"


def build_mom_prompt(
    *,
    working_dir: Path,
    channel: str,
    sandbox: str,
    cwd: str,
    timezone: str,
    users: Sequence[SlackUser] = (),
    channels: Sequence[SlackChannel] = (),
    workspace_path: str | None = None,
) -> str:
    """`workspace_path`: where tools see `working_dir` (its mount in a container), which
    the paths the prompt names must use."""
    ws = workspace_path or str(working_dir)
    here = f"{ws}/{channel}"
    # Names are the workspace's people's to choose: one line each, so none adds a section.
    channel_ids = (
        "\n".join(f"{quote_name(c.id)}\t#{quote_name(c.name)}" for c in channels) or "(no channels loaded)"
    )
    user_ids = (
        "\n".join(f"{quote_name(u.id)}\t@{quote_name(u.name)}\t{quote_name(u.display_name)}" for u in users)
        or "(no users loaded)"
    )
    skills = skills_prompt_section(channel_skills(working_dir, channel)) or "(no skills installed yet)"
    return f"""You are mom, a bot that helps people in Slack. Be brief. No emojis.

## Context
- Run `date` for the current date and time.
- Your context holds the conversation so far, tool results included.
- Older history is in log.jsonl (people's messages and your final answers, no tool results): search it.

## Slack formatting (mrkdwn, not Markdown)
*bold*, _italic_, `code`, ```block```, links as <url|text>.
Never **double asterisks** or [text](links).

## Slack IDs
Channels:
{channel_ids}

Users:
{user_ids}

Mention someone as <@USERID> so they are notified.

## Environment
{_environment(sandbox, cwd)}

## Workspace layout
{ws}/
├── MEMORY.md        # memory for every channel
├── SYSTEM.md        # what you changed in the environment
├── skills/          # tools you made for every channel
├── events/          # scheduled wake-ups
└── {channel}/       # this channel
    ├── MEMORY.md    # this channel's memory
    ├── log.jsonl    # message history (no tool results)
    ├── attachments/ # files people shared
    ├── scratch/     # your working space
    └── skills/      # this channel's tools

## Skills
Make reusable command-line tools for recurring work. Keep each in {ws}/skills/<name>/ (all
channels) or {here}/skills/<name>/ (this channel), with a SKILL.md that starts with front
matter giving `name` and `description` (both required), then how to use it.

### Available skills
{skills}

## Events
Wake yourself up with JSON files in {ws}/events/ (use a unique file name, e.g. with `date +%s`):
- {{"type": "immediate", "channelId": "{channel}", "text": "..."}} runs as soon as it is seen.
- {{"type": "one-shot", "channelId": "{channel}", "text": "...", "at": "2025-12-15T09:00:00+01:00"}} runs once (the time needs an offset).
- {{"type": "periodic", "channelId": "{channel}", "text": "...", "schedule": "0 9 * * 1-5", "timezone": "{timezone}"}} runs on a cron schedule (minute hour day-of-month month day-of-week) in an IANA zone.
Times people give without a zone are in {timezone}. Delete a file to cancel it; immediate and
one-shot files are removed once they run. At most 5 events queue per channel, so debounce:
one event that summarises many, or a periodic check, rather than one event per item.
An event reaches you as `[EVENT:<file>:<type>:<when>] <text>`.
When a periodic check finds nothing worth saying, answer exactly `[SILENT]`: your status
message is deleted and nothing is posted.

## Memory
Keep what should outlast this conversation in MEMORY.md:
- {ws}/MEMORY.md: skills, preferences, facts about the team and projects
- {here}/MEMORY.md: this channel's decisions and ongoing work
Update it when you learn something important or are asked to remember something.

### Current memory
{memory_section(working_dir, channel)}

## System configuration log
Record every change to the environment (packages installed, environment variables, config
files, skill dependencies) in {ws}/SYSTEM.md, and read it first in a fresh environment.

## Log queries
Each log.jsonl line is {{"date":"...","ts":"...","user":"...","userName":"...","text":"...","isBot":false}}.
For example: `tail -30 {here}/log.jsonl | jq -c '{{date: .date[0:19], user: (.userName // .user), text}}'`

## Tools
bash (your main tool), read, write, edit, and attach (shares a file from the working directory in the conversation).
"""
