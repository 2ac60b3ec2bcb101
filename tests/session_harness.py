"""Helpers for driving AgentSessionWorkflow directly in tests."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.worker import Interceptor, Worker

from tempi.agent.model_spec import ModelSpec
from tempi.client import SessionClient, SessionOptions, SessionService
from tempi.store.session_store import SessionStore
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.worker import running_workers
from tempi.workflows.session_types import DEFAULT_TASK_QUEUE, SessionConfig

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
    client: Client,
    sessions_root: Path,
    task_queue: str,
    *,
    host_sandboxes: bool = False,
    activity_hook: Interceptor | None = None,
) -> AsyncIterator[list[Worker]]:
    async with running_workers(
        client,
        task_queue=task_queue,
        sessions_root=sessions_root,
        credentials=fixed_credentials,
        activity_hook=activity_hook,
        host_sandboxes=host_sandboxes,
    ) as workers:
        yield workers


class CountingHandle:
    """The real workflow handle, counting the queries made through it."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self.queries = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)

    async def query(self, *args: Any, **kwargs: Any) -> Any:
        self.queries += 1
        return await self._handle.query(*args, **kwargs)


class Session:
    """A started session plus the events seen so far."""

    def __init__(self, session: SessionClient, config: SessionConfig) -> None:
        self.session = session
        # For what only the workflow execution has: its id, history and result.
        self.handle = session.handle
        self.config = config
        self.follower = session.follow()
        self.events: list[dict[str, Any]] = []

    async def prompt(self, text: str, timeout: float = 30, **kw: Any) -> None:
        # Bounded: an update waits for a worker, and a test without one must fail, not hang.
        await asyncio.wait_for(self.session.prompt(text, **kw), timeout)

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
    **options: Any,
) -> Session:
    """A session in `tmp/work`, its file in `tmp/sessions`; `options` are SessionOptions fields."""
    cwd = tmp / "work"
    cwd.mkdir(parents=True, exist_ok=True)
    service = SessionService(client, SessionStore(tmp / "sessions"), task_queue)
    session = await service.start(
        SessionOptions(
            cwd=str(cwd),
            model=model,
            system_prompt="You are a test agent.",
            tools=tools if tools is not None else ["read", "bash", "edit", "write"],
            **options,
        ),
        session_dir=tmp / "sessions",
    )
    assert session.config is not None
    return Session(session, session.config)


def unique_queue() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"


def assert_single_chain(entries: list[dict[str, Any]]) -> None:
    """A session file's entries (header first) were each written once, each the child of the
    entry before it: what a retried or moved session must still leave behind."""
    ids = [e["id"] for e in entries[1:]]
    assert len(ids) == len(set(ids)), "an entry was written twice"
    for prev, entry in itertools.pairwise(entries[1:]):
        assert entry["parentId"] == prev["id"], f"{entry['id']} does not follow {prev['id']}"
