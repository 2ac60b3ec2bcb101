"""The tests' extension whose tools work on the session's files: `word_count` reads a file
relative to the session's directory, `where` runs a command in the session's sandbox."""

from __future__ import annotations

from typing import Any

PATH = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}


def extension(tempi: Any) -> None:
    async def word_count(args: dict[str, Any], update: Any, ctx: Any) -> str:
        text = await ctx.read_text(args["path"])
        return f"{args['path']} has {len(text.split())} words"

    async def where(args: dict[str, Any], update: Any, ctx: Any) -> str:
        done = await ctx.run(f"pwd; test -e {args['path']} && echo sees-it || echo hidden")
        return f"sandbox {ctx.sandbox}: {done.output.strip()} (exit {done.exit_code})"

    tempi.register_tool("word_count", "Count a file's words.", PATH, word_count, effect="read")
    tempi.register_tool("where", "Where the session's commands run.", PATH, where, effect="read")
