"""Sessions on one Temporal namespace: start, continue, find, fork and list them."""

from __future__ import annotations

from pathlib import Path

from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy

from tempi.client.errors import SessionNotFound
from tempi.client.forking import fork_session_file
from tempi.client.options import FindModel, SessionOptions, new_config, resumed_config
from tempi.client.session import SessionClient
from tempi.store.catalog import SessionSummary
from tempi.store.errors import SessionFileError
from tempi.store.session_store import SessionStore
from tempi.workflows.session_types import DEFAULT_TASK_QUEUE, SessionConfig, SessionInput, workflow_id_for
from tempi.workflows.session_workflow import AgentSessionWorkflow


class SessionService:
    def __init__(self, client: Client, store: SessionStore, task_queue: str = DEFAULT_TASK_QUEUE) -> None:
        self.client = client
        self.store = store
        self.task_queue = task_queue

    def get(self, session_id: str, *, config: SessionConfig | None = None) -> SessionClient:
        """The session with this id, running or not (no server call)."""
        return SessionClient(self.client, session_id, store=self.store, config=config)

    async def start(
        self,
        options: SessionOptions,
        *,
        session_dir: Path | None = None,
        parent_session: str | None = None,
    ) -> SessionClient:
        """A new session with a new file (in `session_dir`, else the store's folder for its cwd)."""
        config = new_config(
            options,
            lambda session_id, created: self.store.new_session_path(options.cwd, session_id, created),
            session_dir=session_dir,
            parent_session=parent_session,
        )
        await self.client.start_workflow(
            AgentSessionWorkflow.run,
            SessionInput(config=config),
            id=workflow_id_for(config.session_id),
            task_queue=self.task_queue,
        )
        return self.get(config.session_id, config=config)

    async def resume(
        self,
        path: Path,
        options: SessionOptions,
        *,
        override_model: bool = False,
        find_model: FindModel | None = None,
    ) -> SessionClient:
        """The session of file `path`: its running workflow, or a new one continuing the file.
        Raises SessionFileError when the file cannot be read."""
        loaded = self.store.load_for_resume(path)  # a copy of another session's file gets its own id
        config = resumed_config(options, loaded, path, override_model=override_model, find_model=find_model)
        session = self.get(config.session_id, config=config)
        if await session.is_running():
            return session
        await self.client.start_workflow(
            AgentSessionWorkflow.run,
            SessionInput(config=config),
            id=workflow_id_for(config.session_id),
            task_queue=self.task_queue,
            # Another client may be continuing the same file right now: share its workflow.
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        return session

    async def fork(
        self,
        source: Path,
        leaf_id: str | None,
        options: SessionOptions,
        *,
        session_dir: Path | None = None,
        find_model: FindModel | None = None,
    ) -> SessionClient:
        """A new session holding the branch of `source` that ends at `leaf_id`, continued
        with the source's model. Raises ValueError for an entry not in the file."""
        path = fork_session_file(self.store, source, leaf_id, session_dir=session_dir)
        return await self.resume(path, options, find_model=find_model)

    async def find(self, ref: str) -> SessionClient:
        """A running session by id, unique id prefix or file path."""
        session = self.get(ref)
        if not await session.is_running():
            try:
                path = self.store.find_session(ref)
                session_id = self.store.load(path).header.id
            except SessionFileError as err:
                raise SessionNotFound(f"No session matches {ref!r}: {err}") from err
            session = self.get(session_id)
            if not await session.is_running():
                raise SessionNotFound(
                    f"Session {session_id} is not running. Continue it with `tempi --session {session_id}`."
                )
        session.session_path = (await session.state()).session_file
        return session

    def list(self, cwd: str | Path | None = None) -> list[SessionSummary]:
        """Session files of one working directory (all when None), newest first."""
        return self.store.list_sessions(cwd)
