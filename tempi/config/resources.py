"""Prompt templates (`prompts/*.md`) and skills (`skills/**/SKILL.md`), found where pi finds
them and where tempi keeps its own: pi's `~/.pi/agent`, `$TEMPI_HOME`, the project's `.pi/`
and `.tempi/`, in that order, a later one winning over an earlier one of the same name.
Paths given by flag (--prompt-template, --skill) come last and win; they are loaded even
when discovery is off (--no-prompt-templates, --no-skills), as in pi."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from tempi.agent.prompt_templates import PromptTemplate, parse_template
from tempi.agent.skills import Skill, parse_skill


def resource_roots(home: Path, cwd: Path, pi_home: Path | None = None) -> list[Path]:
    return [*([pi_home] if pi_home is not None else []), home, cwd / ".pi", cwd / ".tempi"]


def _template_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(path.glob("*.md")) if path.is_dir() else []


def _skill_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        return []
    return [
        found
        for found in sorted(path.rglob("SKILL.md"))
        if not any(
            part.startswith(".") or part == "node_modules" for part in found.relative_to(path).parts[:-1]
        )
    ]


def _explicit(paths: Sequence[str], cwd: Path) -> list[Path]:
    return [p if p.is_absolute() else cwd / p for p in (Path(raw).expanduser() for raw in paths)]


def _template_sources(
    home: Path, cwd: Path, pi_home: Path | None, paths: Sequence[str], discover: bool
) -> Iterable[Path]:
    discovered = [root / "prompts" for root in resource_roots(home, cwd, pi_home)] if discover else []
    for folder in [*discovered, *_explicit(paths, cwd)]:
        yield from _template_files(folder)


def load_prompt_templates(
    home: Path,
    cwd: Path,
    *,
    pi_home: Path | None = None,
    paths: Sequence[str] = (),
    discover: bool = True,
) -> list[PromptTemplate]:
    found: dict[str, PromptTemplate] = {}
    for path in _template_sources(home, cwd, pi_home, paths, discover):
        try:
            found[path.stem] = parse_template(path.read_text(encoding="utf-8"), path.stem, str(path))
        except (OSError, UnicodeDecodeError):
            continue  # an unreadable template is left out, not fatal
    return list(found.values())


def load_skills(
    home: Path,
    cwd: Path,
    *,
    pi_home: Path | None = None,
    paths: Sequence[str] = (),
    discover: bool = True,
) -> list[Skill]:
    found: dict[str, Skill] = {}
    discovered = [root / "skills" for root in resource_roots(home, cwd, pi_home)] if discover else []
    for folder in [*discovered, *_explicit(paths, cwd)]:
        for path in _skill_files(folder):
            try:
                skill = parse_skill(path.read_text(encoding="utf-8"), str(path), path.parent.name)
            except (OSError, UnicodeDecodeError):
                continue
            if skill is not None:
                found[skill.name] = skill
    return list(found.values())
