"""Whether a session may use the repository's own `.tempi/` code and paths: `--trust` and
`--no-trust`, a question in the interactive mode, and a note everywhere else. Only a person
at a terminal is asked; print, JSON, RPC, Slack and pipelines never trust by themselves."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from tempi.config.project_trust import (
    forget_project,
    project_fingerprint,
    project_trusted,
    trust_project,
    what_needs_trust,
)

Ask = Callable[[str], str]


def settle_trust(choice: bool | None, cwd: Path, *, ask: Ask | None = None) -> bool:
    """Records or forgets the owner's trust as `choice` says, asks through `ask` when it says
    nothing and a person is there, and says on stderr what is left out. Whether the project's
    config is used."""
    fingerprint = project_fingerprint(cwd)
    if fingerprint is None:
        return False
    if choice is True:
        trust_project(cwd, fingerprint=fingerprint)
        return True
    if choice is False:
        forget_project(cwd)
        _left_out(cwd, "--no-trust", what_needs_trust(cwd))
        return False
    if project_trusted(cwd):
        return True
    lines = what_needs_trust(cwd)
    if ask is not None:
        shown = "\n".join(f"  {line}" for line in lines)
        answer = ask(
            f"This repository's config ({cwd}) would run code or choose paths as you:\n{shown}\n"
            "Trust it as it is now? A change to these files asks again. [y/N] "
        )
        if answer.strip().lower() in ("y", "yes"):
            trust_project(cwd, fingerprint=fingerprint)
            return True
    _left_out(cwd, "not trusted", lines)
    return False


def terminal_ask() -> Ask | None:
    """A question on the terminal, when there is one to answer it."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return None

    def ask(question: str) -> str:
        print(question, end="", file=sys.stderr, flush=True)
        try:
            return input()
        except EOFError:
            return ""

    return ask


def _left_out(cwd: Path, why: str, lines: list[str]) -> None:
    print(
        f"tempi: the repository config in {cwd} (.tempi/, .pi/settings.json) is {why}, so this session leaves out its "
        f"{', '.join(_kinds(lines))}; `tempi --trust` in {cwd} trusts it as it is now",
        file=sys.stderr,
    )


def _kinds(lines: list[str]) -> list[str]:
    kinds = []
    for prefix, kind in (
        ("MCP", "MCP servers"),
        ("extension", "extensions"),
        ("setting", "sessionDir/shell settings"),
    ):
        if any(line.startswith(prefix) for line in lines):
            kinds.append(kind)
    return kinds or ["config"]
