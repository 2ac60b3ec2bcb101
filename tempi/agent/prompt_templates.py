"""Prompt templates in pi's format: `/name args` expands a markdown file's body, with
`$1`, `$2`…, `$@` / `$ARGUMENTS` (all arguments) and `${@:N}` / `${@:N:L}` (slices)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel

from tempi.agent.subagents import split_frontmatter


class PromptTemplate(BaseModel):
    name: str
    description: str
    content: str
    argument_hint: str | None = None
    source: str


def parse_template(text: str, name: str, source: str) -> PromptTemplate:
    fields, body = split_frontmatter(text)
    description = str(fields.get("description") or "")
    if not description:
        first = next((line.strip() for line in body.splitlines() if line.strip()), "")
        description = first[:60] + ("..." if len(first) > 60 else "")
    hint = fields.get("argument-hint")
    return PromptTemplate(
        name=name,
        description=description,
        content=body,
        argument_hint=str(hint) if hint else None,
        source=source,
    )


def parse_command_args(text: str) -> list[str]:
    """Words separated by blanks; single or double quotes keep blanks inside one argument."""
    args: list[str] = []
    current = ""
    quote: str | None = None
    for char in text:
        if quote:
            if char == quote:
                quote = None
            else:
                current += char
        elif char in "\"'":
            quote = char
        elif char in " \t":
            if current:
                args.append(current)
                current = ""
        else:
            current += char
    if current:
        args.append(current)
    return args


def substitute_args(content: str, args: Sequence[str]) -> str:
    # Positional arguments first, so values that contain `$@` are not expanded again.
    result = re.sub(
        r"\$(\d+)", lambda m: args[int(m.group(1)) - 1] if 0 < int(m.group(1)) <= len(args) else "", content
    )

    def sliced(m: re.Match[str]) -> str:
        start = max(int(m.group(1)) - 1, 0)
        if m.group(2):
            return " ".join(args[start : start + int(m.group(2))])
        return " ".join(args[start:])

    result = re.sub(r"\$\{@:(\d+)(?::(\d+))?\}", sliced, result)
    everything = " ".join(args)
    return result.replace("$ARGUMENTS", everything).replace("$@", everything)


def expand_prompt_template(text: str, templates: Sequence[PromptTemplate]) -> str:
    """The prompt with a leading `/name args` expanded; any other text unchanged."""
    if not text.startswith("/"):
        return text
    name, _, rest = text[1:].partition(" ")
    template = next((t for t in templates if t.name == name), None)
    if template is None:
        return text
    return substitute_args(template.content, parse_command_args(rest))
