"""Skills in pi's (Agent Skills) format: a folder with a SKILL.md whose frontmatter names
and describes it. The system prompt lists them; the model reads a skill when it fits."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from pydantic import BaseModel

from tempi.agent.subagents import split_frontmatter


class Skill(BaseModel):
    name: str
    description: str
    file_path: str
    disable_model_invocation: bool = False


def parse_skill(text: str, file_path: str, folder_name: str) -> Skill | None:
    """The skill a SKILL.md describes, or None when it has no description (pi skips those)."""
    fields, _ = split_frontmatter(text)
    description = str(fields.get("description") or "").strip()
    if not description:
        return None
    return Skill(
        name=str(fields.get("name") or folder_name),
        description=description,
        file_path=file_path,
        disable_model_invocation=bool(fields.get("disable-model-invocation", False)),
    )


def skills_prompt_section(skills: Sequence[Skill]) -> str:
    visible = [s for s in skills if not s.disable_model_invocation]
    if not visible:
        return ""
    lines = [
        "Skills: instructions for particular kinds of task, kept in files. When a task matches a "
        "skill's description, read its file first and follow it; paths inside a skill are "
        "relative to the skill's folder.",
        "<available_skills>",
    ]
    for skill in visible:
        lines += [
            "  <skill>",
            f"    <name>{escape(skill.name)}</name>",
            f"    <description>{escape(skill.description)}</description>",
            f"    <location>{escape(skill.file_path)}</location>",
            "  </skill>",
        ]
    lines.append("</available_skills>")
    return "\n".join(lines)
