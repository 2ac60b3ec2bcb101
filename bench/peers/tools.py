"""What the peers' two tools do, the same as tempi's `read` and `bash` do in the benchmark:
return a file's text, and run a short shell command and return what it printed."""

from __future__ import annotations

import asyncio
from pathlib import Path


def read_file(path: str) -> str:
    return Path(path).read_text()


async def run_command(command: str) -> str:
    proc = await asyncio.create_subprocess_shell(
        command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await proc.communicate()
    return out.decode(errors="replace") + ("" if proc.returncode == 0 else f"\n(exit code {proc.returncode})")
