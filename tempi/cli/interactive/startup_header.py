"""What the interactive mode loaded, listed under its first line as pi lists it at start:
`[Context]` (the AGENTS.md/CLAUDE.md files, in the order the system prompt has them),
`[Skills]`, `[Prompts]` and `[Extensions]`, each a compact comma-separated line, a section
only when something of its kind was loaded. Settings' quietStartup hides it, as in pi."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from rich.console import Group, RenderableType
from rich.text import Text

from tempi.agent.prompt_templates import PromptTemplate
from tempi.agent.skills import Skill


def display_path(path: str) -> str:
    """`~` for the home directory, as pi writes paths."""
    home = os.path.expanduser("~")
    return "~" + path[len(home) :] if home not in ("", "/") and path.startswith(home) else path


def context_label(path: str, cwd: Path) -> str:
    """Relative to the working directory when inside it, else the whole path (pi's rule)."""
    absolute = Path(path).resolve()
    try:
        return str(absolute.relative_to(cwd.resolve())) or "."
    except ValueError:
        return display_path(str(absolute))


def extension_labels(paths: Sequence[str]) -> list[str]:
    """Each extension by the fewest trailing path segments that tell it from the others."""
    segments = [[s for s in display_path(p).split("/") if s and s != "~"] for p in paths]
    labels = []
    for index, own in enumerate(segments):
        label = "/".join(own)
        for count in range(1, len(own) + 1):
            candidate = own[-count:]
            if all(other[-count:] != candidate for i, other in enumerate(segments) if i != index):
                label = "/".join(candidate)
                break
        labels.append(label)
    return labels


def _section(name: str, items: list[str]) -> list[RenderableType]:
    return [Text(f"[{name}]", style="bold"), Text(f"  {', '.join(items)}", style="dim"), Text("")]


def loaded_resources(
    *,
    cwd: Path,
    context_files: Sequence[str],
    skills: Sequence[Skill],
    templates: Sequence[PromptTemplate],
    extensions: Sequence[str],
) -> RenderableType | None:
    """The sections, or None when nothing was loaded."""
    parts: list[RenderableType] = []
    if context_files:
        parts += _section("Context", [context_label(p, cwd) for p in context_files])
    if skills:
        parts += _section("Skills", sorted((s.name for s in skills), key=str.lower))
    if templates:
        parts += _section("Prompts", sorted((f"/{t.name}" for t in templates), key=str.lower))
    if extensions:
        parts += _section("Extensions", sorted(extension_labels(extensions), key=str.lower))
    return Group(Text(""), *parts) if parts else None
