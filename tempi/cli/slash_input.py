"""What a line starting with `/` means: a prompt template (`/name`), a skill
(`/skill:name`, expanded as pi does), or a command tempi does not have. A command word
that names nothing is refused before it reaches the model, where it would only cost
tokens (the model takes `/settings` as a request and starts running tools)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from tempi.agent.prompt_templates import PromptTemplate, expand_prompt_template
from tempi.agent.skills import Skill
from tempi.agent.subagents import split_frontmatter

SKILL_PREFIX = "/skill:"
# `/word` or `/skill:name` alone as the first word: a command. `/usr/bin/env` (a path) or
# `/ 2` is text meant for the model.
_COMMAND_WORD = re.compile(r"/[A-Za-z][\w.-]*(:[\w.-]*)?")


def command_word(text: str) -> str | None:
    """The `/word` a line starts with when that word reads as a command, else None."""
    first = text.strip().split(maxsplit=1)[0] if text.strip() else ""
    return first if _COMMAND_WORD.fullmatch(first) else None


def expand_skill_command(text: str, skills: Sequence[Skill]) -> str:
    """pi's `/skill:name args`: the skill's body in a <skill> block, then the arguments."""
    if not text.startswith(SKILL_PREFIX):
        return text
    name, _, args = text[len(SKILL_PREFIX) :].partition(" ")
    skill = next((s for s in skills if s.name == name), None)
    if skill is None:
        return text
    path = Path(skill.file_path)
    try:
        _, body = split_frontmatter(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return text
    block = (
        f'<skill name="{skill.name}" location="{skill.file_path}">\n'
        f"References are relative to {path.parent}.\n\n{body.strip()}\n</skill>"
    )
    return f"{block}\n\n{args.strip()}" if args.strip() else block


def expand_input(text: str, templates: Sequence[PromptTemplate], skills: Sequence[Skill]) -> str:
    return expand_prompt_template(expand_skill_command(text, skills), templates)


def names_a_resource(text: str, templates: Sequence[PromptTemplate], skills: Sequence[Skill]) -> bool:
    """Whether `/word` is a prompt template or a skill, which expand instead of running."""
    word = command_word(text)
    if word is None:
        return False
    if word.startswith(SKILL_PREFIX):
        return any(s.name == word[len(SKILL_PREFIX) :] for s in skills)
    return any(t.name == word[1:] for t in templates)


def refusal(
    text: str, templates: Sequence[PromptTemplate], skills: Sequence[Skill], commands: Sequence[str]
) -> str | None:
    """Why a `/word` line is not sent to the model, or None when it is a prompt."""
    word = command_word(text)
    if word is None or names_a_resource(text, templates, skills):
        return None
    if word.startswith(SKILL_PREFIX):
        known = ", ".join(sorted(s.name for s in skills)) or "none are installed"
        return (
            f"No skill named {word[len(SKILL_PREFIX) :]!r} (skills: {known}). Nothing was sent to the model."
        )
    near = [c for c in commands if c.startswith(word[1:3])] if len(word) > 2 else []
    hint = f" Did you mean {', '.join('/' + c for c in near[:3])}?" if near else ""
    return (
        f"Unknown command {word}: nothing was sent to the model.{hint} /hotkeys lists the commands "
        f"(to ask the model about {word}, put it inside a sentence)."
    )


def resource_completions(
    templates: Sequence[PromptTemplate], skills: Sequence[Skill]
) -> list[tuple[str, str]]:
    """Prompt templates and skills for the `/` completion list, after the commands."""
    return [(t.name, t.description) for t in templates] + [(f"skill:{s.name}", s.description) for s in skills]
