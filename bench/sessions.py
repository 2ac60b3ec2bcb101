"""Scripted sessions shared by the benchmarks and chaos runs, and ways to run them:
with no orchestration at all (the floor), through tempi's CLI, and through pi's."""

from __future__ import annotations

import itertools
import json
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from temporalio.client import Client

from bench.rig import API, API_KEY, MODEL_ID, PROVIDER
from tempi.activities.llm import StreamOptions, complete
from tempi.activities.tools import ToolContext, execute_tool
from tempi.agent.llm_context import LlmContext
from tempi.agent.llm_conversion import to_llm_messages
from tempi.agent.messages import AssistantMessage, TextContent, ToolResultMessage, UserMessage
from tempi.agent.model_spec import ModelSpec
from tempi.agent.tool_specs import tool_specs
from tempi.client import SessionClient, SessionOptions, SessionService
from tempi.client.events import SessionHandle
from tempi.store.session_store import SessionStore

TurnKind = Literal["tool", "bash"]
DEFAULT_TOOLS = ["read", "bash", "edit", "write"]
PROMPT = "Work through the scripted steps."
NOTES = "notes.txt"


def tool_call_for(kind: TurnKind, i: int) -> dict[str, Any]:
    if kind == "bash":
        return {"name": "bash", "arguments": {"command": f"echo turn-{i}"}}
    return {"name": "read", "arguments": {"path": NOTES}}


def scripted_turns(kind: TurnKind, turns: int, *, text_chars: int = 40) -> list[dict[str, Any]]:
    """`turns` tool turns (a short text plus one tool call), then a final answer."""
    pad = ("x" * text_chars)[: max(0, text_chars - 8)]
    return [{"text": f"Step {i}. {pad}", "tool_calls": [tool_call_for(kind, i)]} for i in range(turns)] + [
        {"text": "All steps done."}
    ]


def prepare_workspace(cwd: Path) -> None:
    cwd.mkdir(parents=True, exist_ok=True)
    (cwd / NOTES).write_text("".join(f"line {n}: some notes for the agent to read\n" for n in range(40)))


def model_for(url: str) -> ModelSpec:
    return ModelSpec(
        id=MODEL_ID, name=MODEL_ID, api=API, provider=PROVIDER, base_url=url, context_window=200_000
    )


@dataclass
class FloorTurn:
    llm_s: float
    tool_s: float


async def run_floor(url: str, cwd: Path) -> list[FloorTurn]:
    """The same model calls and tool calls in a plain loop: no workflow, no store, no events."""
    model = model_for(url)
    options = StreamOptions(api_key=API_KEY)
    specs = tool_specs(DEFAULT_TOOLS)
    history: list[Any] = [UserMessage(content=[TextContent(text=PROMPT)], timestamp=int(time.time() * 1000))]
    turns: list[FloorTurn] = []
    while True:
        t0 = time.perf_counter()
        context = LlmContext(
            system_prompt="You are a test agent.", messages=to_llm_messages(history), tools=specs
        )
        message: AssistantMessage = await complete(model, context, options)
        t1 = time.perf_counter()
        history.append(message)
        calls = message.tool_calls()
        if message.stop_reason == "error":
            raise RuntimeError(f"floor run failed: {message.error_message}")
        if not calls:
            turns.append(FloorTurn(t1 - t0, 0.0))
            return turns
        for call in calls:
            outcome = await execute_tool(call.name, call.arguments, ToolContext(cwd=str(cwd)))
            history.append(
                ToolResultMessage(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    content=outcome.content,
                    details=outcome.details,
                    is_error=outcome.is_error,
                    timestamp=int(time.time() * 1000),
                )
            )
        turns.append(FloorTurn(t1 - t0, time.perf_counter() - t1))


@dataclass
class CliRun:
    """A `--mode json` run seen from outside: when each event line arrived."""

    wall_s: float
    exit_code: int
    turn_starts: list[float] = field(default_factory=list)  # seconds since process start
    first_token_s: float | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    stderr: str = ""

    def turn_times(self) -> list[float]:
        """Per-turn wall time as a client sees it: turn_start to the next turn_start, and
        the last turn to the end of the process."""
        marks = [*self.turn_starts, self.wall_s]
        return [b - a for a, b in itertools.pairwise(marks)]


def run_json_cli(
    argv: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float = 600, keep_events: bool = False
) -> CliRun:
    """Run a `--mode json` command, stamping every event line as it arrives."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    run = CliRun(wall_s=0.0, exit_code=0)
    assert proc.stdout is not None
    deadline = start + timeout_s
    for raw in proc.stdout:
        now = time.perf_counter() - start
        try:
            event = json.loads(raw)
        except json.JSONDecodeError:
            continue
        kind = event.get("type") if isinstance(event, dict) else None
        if kind == "turn_start":
            run.turn_starts.append(now)
        elif kind == "message_update" and run.first_token_s is None:
            run.first_token_s = now
        if keep_events:
            run.events.append(event)
        if time.perf_counter() > deadline:
            proc.kill()
            break
    proc.wait()
    run.wall_s = time.perf_counter() - start
    run.exit_code = proc.returncode
    assert proc.stderr is not None
    run.stderr = proc.stderr.read().decode(errors="replace")
    return run


def tempi_json_argv(prompt: str = PROMPT, *extra: str) -> list[str]:
    from bench.rig import tempi_command

    return tempi_command("--mode", "json", "-p", prompt, "--provider", PROVIDER, "--model", MODEL_ID, *extra)


def pi_json_argv(pi_bin: str, prompt: str = PROMPT) -> list[str]:
    return [pi_bin, "--mode", "json", "-p", prompt, "--provider", PROVIDER, "--model", MODEL_ID]


@dataclass
class DirectSession:
    """A session started straight through the session API, as tempi's CLI does."""

    session: SessionClient
    session_path: Path
    cwd: Path

    @property
    def handle(self) -> SessionHandle:
        return self.session.handle


async def start_direct_session(
    client: Client, task_queue: str, directory: Path, url: str, *, prompt: str = PROMPT, **options: Any
) -> DirectSession:
    cwd = directory / f"ws-{uuid.uuid4().hex[:8]}"
    prepare_workspace(cwd)
    service = SessionService(client, SessionStore(directory / "sessions"), task_queue)
    session = await service.start(
        SessionOptions(
            cwd=str(cwd),
            model=model_for(url),
            system_prompt="You are a test agent.",
            tools=DEFAULT_TOOLS,
            **options,
        ),
        session_dir=directory / "sessions",
    )
    await session.prompt(prompt)
    assert session.config is not None
    return DirectSession(session, Path(session.config.session_path), cwd)


def final_answer(path: Path) -> dict[str, Any] | None:
    """The session's last entry if it is an assistant message that ends a run (no tool
    calls), read from the file so that watching costs the worker nothing."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - 65536))
            tail = f.read().splitlines()
    except FileNotFoundError:
        return None
    if not tail:
        return None
    try:
        entry = json.loads(tail[-1])
    except json.JSONDecodeError:
        return None
    message = entry.get("message") if entry.get("type") == "message" else None
    if not message or message.get("role") != "assistant":
        return None
    if message.get("stopReason") in ("stop", "error", "aborted") and not any(
        block.get("type") == "toolCall" for block in message.get("content", [])
    ):
        return message
    return None


async def wait_all_done(paths: list[Path], timeout_s: float, poll_s: float = 0.2) -> dict[Path, float]:
    """When each session file got its final answer (time.time()); raises on timeout."""
    import asyncio

    done: dict[Path, float] = {}
    # A file is read only when its size changed since the last look: at 100 sessions, reading
    # every tail 20 times a second took CPU from the worker and server being measured.
    sizes: dict[Path, int] = {}
    deadline = time.monotonic() + timeout_s
    while len(done) < len(paths):
        for path in paths:
            if path in done:
                continue
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            if sizes.get(path) == size:
                continue
            sizes[path] = size
            if final_answer(path) is not None:
                done[path] = time.time()
        if len(done) == len(paths):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{len(paths) - len(done)} of {len(paths)} sessions unfinished after {timeout_s} s"
            )
        await asyncio.sleep(poll_s)
    return done
