"""pi's own lock library, proper-lockfile, run by node from pi's installation with the options
pi's auth storage uses, to check that tempi's auth.json lock and pi's exclude each other."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pi_bin import pi_bin

# auth-storage.js's withLockAsync, the lock pi refreshes a login under.
PI_LOCK_OPTIONS = (
    "{retries: {retries: 10, factor: 2, minTimeout: 100, maxTimeout: 10000, randomize: true}, stale: 30000}"
)

_HOLD = f"""
const lockfile = require("proper-lockfile");
const fs = require("fs");
const path = process.argv[1];
(async () => {{
  const release = await lockfile.lock(path, {PI_LOCK_OPTIONS});
  console.log("locked");
  require("readline").createInterface({{ input: process.stdin }}).once("line", async (line) => {{
    fs.writeFileSync(path, line, "utf-8");
    fs.chmodSync(path, 0o600);
    await release();
    console.log("released");
    process.exit(0);
  }});
}})();
"""

_WAIT = f"""
const lockfile = require("proper-lockfile");
const path = process.argv[1];
(async () => {{
  console.log("held=" + (await lockfile.check(path, {{ stale: 30000 }})));
  const release = await lockfile.lock(path, {PI_LOCK_OPTIONS});
  console.log("acquired " + Date.now());
  await release();
}})();
"""


def pi_node_modules() -> Path:
    for parent in Path(pi_bin()).resolve().parents:
        if (parent / "proper-lockfile").is_dir():
            return parent
        if (parent / "node_modules" / "proper-lockfile").is_dir():
            return parent / "node_modules"
    pytest.skip("pi's installation has no proper-lockfile")


class _Node:
    def __init__(self, script: str, path: Path, modules: Path) -> None:
        self.proc = subprocess.Popen(
            ["node", "-e", script, str(path)],
            env={**os.environ, "NODE_PATH": str(modules)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def line(self) -> str:
        assert self.proc.stdout is not None
        text = self.proc.stdout.readline().strip()
        assert text, self.proc.stderr.read() if self.proc.stderr else "node ended"
        return text


class Holder(_Node):
    def write_and_release(self, entries: dict[str, object]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(entries) + "\n")
        self.proc.stdin.flush()
        assert self.line() == "released"


class Waiter(_Node):
    def saw_it_held(self) -> bool:
        return self.line() == "held=true"

    def acquired_ms(self) -> int:
        word, _, ms = self.line().partition(" ")
        assert word == "acquired"
        return int(ms)


class NodeLockfile:
    def __init__(self, modules: Path) -> None:
        self.modules = modules
        self.started: list[_Node] = []

    def hold(self, path: Path) -> Holder:
        """proper-lockfile takes `path`'s lock as pi does; returns once it holds it."""
        holder = Holder(_HOLD, path, self.modules)
        self.started.append(holder)
        assert holder.line() == "locked"
        return holder

    def wait(self, path: Path) -> Waiter:
        waiter = Waiter(_WAIT, path, self.modules)
        self.started.append(waiter)
        return waiter


@pytest.fixture
def node_lockfile() -> Iterator[NodeLockfile]:
    runner = NodeLockfile(pi_node_modules())
    yield runner
    for node in runner.started:
        if node.proc.poll() is None:
            node.proc.kill()
        node.proc.wait(10)
