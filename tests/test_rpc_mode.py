"""`tempi --mode rpc` against the real rig (Temporal dev server, worker, scripted LLM),
compared with what pi 0.73.1 answered to the same commands."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import tempi_env, write_models_json
from tests.fixture_paths import PI_FIXTURES


class RpcProcess:
    def __init__(self, args: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tempi", "--mode", "rpc", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        # Everything read so far, in order: each is a parsed line (or the raw bytes if not JSON).
        self.seen: list[Any] = []
        self._cursor = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        buffer = b""
        while True:
            chunk = self.proc.stdout.read1(65536)
            if not chunk:
                self.lines.put(None)
                return
            *complete, buffer = (buffer + chunk).split(b"\n")
            for line in complete:
                self.lines.put(line)

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, command: dict[str, Any]) -> None:
        self.send_raw(json.dumps(command, ensure_ascii=False).encode("utf-8") + b"\n")

    def _next(self, deadline: float) -> Any:
        while self._cursor >= len(self.seen):
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                raise TimeoutError(f"no more output; stderr so far:\n{self.stderr_text()}")
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                continue
            if line is None:
                raise EOFError(f"tempi closed stdout; stderr:\n{self.stderr_text()}")
            try:
                self.seen.append(json.loads(line))
            except json.JSONDecodeError:
                self.seen.append(line)
        item = self.seen[self._cursor]
        self._cursor += 1
        return item

    def wait_for(self, match: Any, timeout: float = 30) -> dict[str, Any]:
        """The next output line for which `match(line)` holds (earlier lines stay in `seen`)."""
        deadline = time.monotonic() + timeout
        while True:
            item = self._next(deadline)
            if isinstance(item, dict) and match(item):
                return item

    def response(self, command: str, timeout: float = 30) -> dict[str, Any]:
        return self.wait_for(lambda m: m.get("type") == "response" and m.get("command") == command, timeout)

    def event(self, kind: str, timeout: float = 30) -> dict[str, Any]:
        return self.wait_for(lambda m: m.get("type") == kind, timeout)

    def call(self, command: dict[str, Any], timeout: float = 30) -> dict[str, Any]:
        self.send(command)
        return self.response(command["type"], timeout)

    def stderr_text(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode("utf-8", "replace")

    def close(self, timeout: float = 15) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
