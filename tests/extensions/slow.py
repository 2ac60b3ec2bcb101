"""The tests' slow tools: each notes its call in the file named by `calls.path` beside this
module, then answers once the gate file named by `gate.path` exists. `slow_lookup` only
reads; `slow_record` writes, so it runs at most once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


async def _note_then_wait(line: str) -> str:
    calls = Path((HERE / "calls.path").read_text().strip())
    gate = Path((HERE / "gate.path").read_text().strip())
    with calls.open("a") as log:
        log.write(line + "\n")
    while not gate.exists():
        await asyncio.sleep(0.05)
    return f"finished {line}"


def extension(tempi: Any) -> None:
    schema = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}

    async def slow_lookup(args: dict[str, Any], update: Any) -> str:
        return await _note_then_wait(f"lookup {args['key']}")

    async def slow_record(args: dict[str, Any], update: Any) -> str:
        return await _note_then_wait(f"record {args['key']}")

    tempi.register_tool("slow_lookup", "Look a key up, slowly.", schema, slow_lookup, effect="read")
    tempi.register_tool("slow_record", "Record a key, slowly.", schema, slow_record, effect="write")
