"""tempi's system prompt: who the agent is, which tools it has, where it works."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

TOOL_SUMMARIES = {
    "read": "show a file's contents (text or image), a window of lines at a time",
    "bash": "run a shell command in the working directory",
    "edit": "replace exact snippets of text in a file",
    "write": "create or overwrite a file",
    "grep": "search file contents with a regular expression",
    "find": "list files whose paths match a glob",
    "ls": "list a directory",
}

GUIDELINES = """\
How to work:
- Look before you change: read the relevant files, search for usages, then edit.
- Prefer `edit` for changes to existing files; use `write` for new files or full rewrites.
- Keep changes focused on the request; mention anything else you notice instead of fixing it silently.
- Run the project's tests or the program after a change when that is possible, and report what happened.
- When you are done, answer briefly: what changed and anything the user must know."""


class ContextFile(BaseModel):
    path: str
    content: str


def build_system_prompt(
    *,
    tools: Sequence[str],
    cwd: str,
    today: str,
    custom_prompt: str | None = None,
    append: Sequence[str] = (),
    context_files: Sequence[ContextFile] = (),
    skills: str = "",
) -> str:
    if custom_prompt is not None:
        parts = [custom_prompt]
    else:
        lines = [
            "You are tempi, a coding agent. You work in the user's project through tools: reading and "
            "editing files and running commands, then reporting back clearly.",
            "",
        ]
        if tools:
            lines.append("Tools you can call:")
            lines += [f"- {name}: {TOOL_SUMMARIES.get(name, 'a tool')}" for name in tools]
        else:
            lines.append("You have no tools in this session; answer from the conversation alone.")
        lines += ["", GUIDELINES]
        parts = ["\n".join(lines)]
    parts += [text for text in append if text]
    if context_files:
        project = ["Project instructions found in context files:"]
        for f in context_files:
            project.append(f"\n## {f.path}\n\n{f.content.strip()}")
        parts.append("\n".join(project))
    if skills:
        parts.append(skills)
    parts.append(f"Current date: {today}\nWorking directory: {cwd}")
    return "\n\n".join(parts)
