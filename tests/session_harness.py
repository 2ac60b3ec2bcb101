"""Helpers for driving AgentSessionWorkflow directly in tests."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

from tempi.agent.model_spec import ModelSpec
from tempi.cli.event_follower import EventFollower
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.worker import running_workers
from tempi.workflows.session_types import (
    DEFAULT_TASK_QUEUE,
    SESSION_WORKFLOW,
    PromptRequest,
    SessionConfig,
    SessionInput,
    workflow_id_for,
)

API_KEY = "sk-test-secret-0123456789"


def scripted_model(
    server: ScriptedLLMServer, scenario: str, api: str = "openai-completions", context_window: int = 128_000
) -> ModelSpec:
    return ModelSpec(
        id="mock-model",
        name="mock-model",
        api=api,
        provider="mock",
        base_url=server.url_for(scenario, api),
        context_window=context_window,
        max_tokens=16384,
    )


def fixed_credentials(_model: ModelSpec) -> tuple[str | None, dict[str, str]]:
    return API_KEY, {}


@contextlib.asynccontextmanager
async def running_worker(
    client: Client, sessions_root: Path, task_queue: str, *, host_sandboxes: bool = False
) -> AsyncIterator[list[Worker]]:
    async with running_workers(
        client,
        task_queue=task_queue,
        sessions_root=sessions_root,
        credentials=fixed_credentials,
        host_sandboxes=host_sandboxes,
    ) as workers:
        yield workers


class Session:
    """A started session workflow plus a follower of its events."""

    def __init__(
        self, handle: WorkflowHandle[Any, Any], config: SessionConfig, client: Client | None = None
    ) -> None:
        self.handle = handle
        self.config = config
        self.follower = EventFollower(handle, config.session_path, config.session_id, client=client)
        self.events: list[dict[str, Any]] = []

    async def prompt(self, text: str, timeout: float = 30, **kw: Any) -> None:
        # Bounded: an update waits for a worker, and a test without one must fail, not hang.
        await asyncio.wait_for(
            self.handle.execute_update("prompt", PromptRequest(message=text, **kw)), timeout
        )

    async def collect_until(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 60
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            batch = await self.follower.poll()
            self.events.extend(batch)
            match = next((e for e in batch if predicate(e)), None)
            if match is not None:
                return match
            await asyncio.sleep(0.03)
        raise TimeoutError(
            f"no matching event within {timeout} s; last: {[e['type'] for e in self.events[-8:]]}"
        )

    async def run_to_idle(self, timeout: float = 60) -> list[dict[str, Any]]:
        start = len(self.events)
        deadline = time.monotonic() + timeout
        async for event in self.follower.events(until_idle=True):
            self.events.append(event)
            if time.monotonic() > deadline:
                raise TimeoutError("run did not finish")
        return self.events[start:]

    def roles(self) -> list[str]:
        return [e["message"]["role"] for e in self.events if e["type"] == "message_end"]


async def start_session(
    client: Client,
    tmp: Path,
    model: ModelSpec,
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    tools: list[str] | None = None,
    **config: Any,
) -> Session:
    session_id = str(uuid.uuid4())
    cwd = tmp / "work"
    cwd.mkdir(parents=True, exist_ok=True)
    cfg = SessionConfig(
        session_id=session_id,
        session_path=str(tmp / "sessions" / f"{session_id}.jsonl"),
        cwd=str(cwd),
        model=model,
        system_prompt="You are a test agent.",
        tools=tools if tools is not None else ["read", "bash", "edit", "write"],
        **config,
    )
    await client.start_workflow(
        SESSION_WORKFLOW, SessionInput(config=cfg), id=workflow_id_for(session_id), task_queue=task_queue
    )
    return Session(client.get_workflow_handle(workflow_id_for(session_id)), cfg, client)


def unique_queue() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"
