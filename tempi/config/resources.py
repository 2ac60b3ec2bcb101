"""Prompt templates (`prompts/*.md`) and skills (`skills/**/SKILL.md`) from `$TEMPI_HOME`
and the project's `.tempi/`; a project's template wins over a global one of the same name."""

from __future__ import annotations

from pathlib import Path

from tempi.agent.prompt_templates import PromptTemplate, parse_template
from tempi.agent.skills import Skill, parse_skill


def _roots(home: Path, cwd: Path) -> list[Path]:
    return [home, cwd / ".tempi"]


def load_prompt_templates(home: Path, cwd: Path) -> list[PromptTemplate]:
    found: dict[str, PromptTemplate] = {}
    for root in _roots(home, cwd):
        folder = root / "prompts"
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.md")):
            try:
                found[path.stem] = parse_template(path.read_text(encoding="utf-8"), path.stem, str(path))
            except (OSError, UnicodeDecodeError):
                continue  # an unreadable template is left out, not fatal
    return list(found.values())


def load_skills(home: Path, cwd: Path) -> list[Skill]:
    found: dict[str, Skill] = {}
    for root in _roots(home, cwd):
        folder = root / "skills"
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("SKILL.md")):
            if any(
                part.startswith(".") or part == "node_modules" for part in path.relative_to(folder).parts[:-1]
            ):
                continue
            try:
                skill = parse_skill(path.read_text(encoding="utf-8"), str(path), path.parent.name)
            except (OSError, UnicodeDecodeError):
                continue
            if skill is not None:
                found[skill.name] = skill
    return list(found.values())
