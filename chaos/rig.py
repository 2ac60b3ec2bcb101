"""The chaos rig: one Temporal dev server, the scripted LLM server, and per run a worker
process of its own on its own task queue, so runs never share state."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client

from bench.rig import PROVIDER, DevServer, WorkerProcess, provider_entry
from bench.sessions import DEFAULT_TOOLS, final_answer, model_for
from chaos.checks import LOG_FILE
from tempi.agent.model_spec import ModelSpec
from tempi.client import SessionClient, SessionOptions, SessionService
from tempi.client.events import SessionHandle
from tempi.store.session_store import SessionStore
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workflows.session_types import RetryPolicySettings

# pi's retry policy, with a shorter base delay so a run with many injected faults stays
# short; the number of retries and the doubling are pi's.
FAST_RETRY = RetryPolicySettings(base_delay_ms=200, max_delay_ms=2000)


@dataclass
class ChaosRig:
    directory: Path
    address: str
    client: Client
    llm: ScriptedLLMServer
    dev: DevServer | None = None  # present when the rig owns the server and may restart it
    providers: dict[str, Any] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        home = self.directory / "home"
        home.mkdir(parents=True, exist_ok=True)
        return home

    def model(self, scenario: str) -> ModelSpec:
        """The mock model at `scenario`'s address, added to the workers' models.json first:
        workers call only endpoints their owner configured. One provider per scenario, since
        runs (the bursts' good and bad sessions) share the workers' home at once."""
        url = self.llm.url_for(scenario, "openai-completions")
        provider = f"{PROVIDER}-{scenario}"
        self.providers[provider] = provider_entry(url)
        # Replaced whole: a worker reading a half-written file would fail its session's turn
        # (a broken models.json is a final configuration error).
        staged = self.home / "models.json.new"
        staged.write_text(json.dumps({"providers": self.providers}, indent=2))
        os.replace(staged, self.home / "models.json")
        return model_for(url).model_copy(update={"provider": provider})

    def run_dir(self, name: str) -> Path:
        path = self.directory / f"{name}-{uuid.uuid4().hex[:6]}"
        path.mkdir(parents=True)
        return path

    def worker(self, run_dir: Path, queue: str) -> WorkerProcess:
        return WorkerProcess(self.home, self.address, queue, log=run_dir / "worker.log")


def scripted_steps(steps: int, extra: dict[int, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """A session that changes the workspace: bash appends to a log, write creates files,
    read reads them back; every turn streams a little text first."""
    turns = []
    for i in range(steps):
        call: dict[str, Any]
        if i % 3 == 0:
            call = {"name": "bash", "arguments": {"command": f"echo turn-{i} >> {LOG_FILE}"}}
        elif i % 3 == 1:
            call = {"name": "write", "arguments": {"path": f"files/f-{i}.txt", "content": f"content {i}\n"}}
        else:
            call = {"name": "read", "arguments": {"path": f"files/f-{i - 1}.txt"}}
        turn: dict[str, Any] = {
            "text": f"Step {i}: " + "working " * 6,
            "chunk_size": 8,
            "chunk_delay_ms": 4,
            "tool_calls": [call],
        }
        turns.append(turn)
    for i, changes in (extra or {}).items():
        turns[i].update(changes)
    turns.append({"text": "All steps done."})
    return turns


@dataclass
class ChaosSession:
    session: SessionClient
    path: Path
    cwd: Path

    @property
    def handle(self) -> SessionHandle:
        return self.session.handle


async def start_session(
    rig: ChaosRig, run_dir: Path, scenario: str, queue: str, *, session_dir: Path | None = None
) -> ChaosSession:
    cwd = run_dir / "ws"
    cwd.mkdir(parents=True, exist_ok=True)
    directory = session_dir or run_dir / "sessions"
    service = SessionService(rig.client, SessionStore(directory), queue)
    session = await service.start(
        SessionOptions(
            cwd=str(cwd),
            model=rig.model(scenario),
            system_prompt="You are a test agent.",
            tools=DEFAULT_TOOLS,
            retry=FAST_RETRY,
        ),
        session_dir=directory,
    )
    await asyncio.wait_for(session.prompt("Run the steps."), 60)
    assert session.config is not None
    return ChaosSession(session, Path(session.config.session_path), cwd)


async def wait_finished(session: ChaosSession, timeout_s: float) -> None:
    """Until the session file ends with a final answer or an error and the workflow says
    it is idle (an error entry may be followed by an automatic retry). The workflow must
    still be there for the next prompt: a fault may end a run, never the session."""
    from temporalio.service import RPCError

    from chaos.checks import ChaosFailure

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if final_answer(session.path) is not None:
            try:
                state = await asyncio.wait_for(session.session.state(), 10)
            except (RPCError, TimeoutError):
                state = None  # no worker or no server at this moment: look again
            if state is not None and not state.is_streaming and final_answer(session.path) is not None:
                status = await _workflow_status(session)
                if status != "RUNNING":
                    raise ChaosFailure(
                        f"the session's workflow ended ({status}) instead of waiting for a prompt"
                    )
                return
        await asyncio.sleep(0.2)
    try:
        where = f"; its workflow is {await _workflow_status(session)}"
    except RPCError:
        where = ""
    raise ChaosFailure(f"the session did not finish within {timeout_s:.0f} s{where}")


async def _workflow_status(session: ChaosSession) -> str:
    status = (await session.handle.describe()).status
    return status.name if status else "unknown"


def entry_count(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


async def wait_entries(path: Path, count: int, timeout_s: float) -> bool:
    """Until the session file has `count` lines (False if the session ended first)."""
    deadline = time.monotonic() + timeout_s
    while entry_count(path) < count:
        if final_answer(path) is not None or time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def session_events(session: ChaosSession) -> list[dict[str, Any]]:
    """The workflow's whole event log (every page)."""
    events: list[dict[str, Any]] = []
    offset = 0
    while True:
        page = await session.session.read_events(offset)
        events.extend(page.events)
        if page.next_offset == offset or not page.events:
            return events
        offset = page.next_offset
