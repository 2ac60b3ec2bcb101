"""Sessions on one Temporal namespace: start, continue, find, fork and list them."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy

from tempi.agent.thinking_levels import clamp_level
from tempi.client.choices import ChoiceMemory
from tempi.client.errors import SessionMismatch, SessionNotFound
from tempi.client.file_news import take_in_file_news
from tempi.client.forking import fork_session_file
from tempi.client.options import FindModel, SessionOptions, new_config, resumed_config
from tempi.client.session import SessionClient
from tempi.store.catalog import SessionSummary
from tempi.store.errors import AmbiguousSessionError, SessionFileError, SessionNotFoundError
from tempi.store.known_end import mark_all_known
from tempi.store.session_store import SessionStore
from tempi.workflows.session_types import DEFAULT_TASK_QUEUE, SessionConfig, SessionInput, workflow_id_for
from tempi.workflows.session_workflow import AgentSessionWorkflow


class SessionService:
    def __init__(
        self,
        client: Client,
        store: SessionStore,
        task_queue: str = DEFAULT_TASK_QUEUE,
        *,
        remember: ChoiceMemory | None = None,
    ) -> None:
        self.client = client
        self.store = store
        self.task_queue = task_queue
        # Given to every session this service hands out (see SessionClient.remember).
        self.remember = remember

    def get(
        self, session_id: str, *, config: SessionConfig | None = None, workflow_id: str | None = None
    ) -> SessionClient:
        """The session with this id, running or not (no server call); `workflow_id` for one
        that another workflow runs (a pipeline's shard)."""
        return SessionClient(
            self.client,
            session_id,
            store=self.store,
            config=config,
            remember=self.remember,
            workflow_id=workflow_id,
        )

    async def start(
        self,
        options: SessionOptions,
        *,
        session_dir: Path | None = None,
        session_file: Path | None = None,
        parent_session: str | None = None,
    ) -> SessionClient:
        """A new session with a new file: `session_file`, else one in `session_dir`, else one
        in the store's folder for its cwd."""
        config = new_config(
            options,
            lambda session_id, created: self.store.new_session_path(options.cwd, session_id, created),
            session_dir=session_dir,
            session_file=session_file,
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
        fixed: Collection[str] = (),
    ) -> SessionClient:
        """The session of file `path`: its running workflow, or a new one continuing the file.

        A running workflow keeps its config, so what the caller asks must be reconciled with
        it: with `override_model` the model is switched; `fixed` names options the caller
        chose explicitly ("sandbox", "tools") that a running workflow cannot change, and a
        difference raises SessionMismatch instead of being dropped. Raises SessionFileError
        when the file cannot be read."""
        loaded = self.store.load_for_resume(path)  # a copy of another session's file gets its own id
        config = resumed_config(options, loaded, path, override_model=override_model, find_model=find_model)
        session = self.get(config.session_id, config=config)
        if await session.is_running():
            await _join_running(session, config, override_model=override_model, fixed=fixed)
            return session
        # The new workflow continues from the file's last entry: everything in the file now
        # is its history, and only lines appended from here on are another program's news.
        mark_all_known(path, config.session_id)
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

    async def find(self, ref: str, session_dir: Path | None = None) -> SessionClient:
        """A running session by id, unique id prefix or file path; the sessions of
        `session_dir` (settings.json's `sessionDir`) are looked at first."""
        session = self.get(ref)
        if not await session.is_running():
            try:
                path = self.store.find_session(ref, session_dir)
                session_id = self.store.load(path).header.id
            except (SessionNotFoundError, AmbiguousSessionError) as err:
                raise SessionNotFound(str(err)) from err  # it names the reference and where it looked
            except SessionFileError as err:
                raise SessionNotFound(f"Cannot read session {ref!r}: {err}") from err
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


def _sandbox_of(config: SessionConfig) -> str:
    if config.sandbox == "container":
        return f"container:{config.sandbox_container}"
    return f"docker:{config.sandbox_image}" if config.sandbox == "docker" else config.sandbox


async def _join_running(
    session: SessionClient, wanted: SessionConfig, *, override_model: bool, fixed: Collection[str]
) -> None:
    """Make `session.config` the running workflow's, after applying what can be applied."""
    running = await session.running_config()
    short = wanted.session_id[:8]
    how = (
        f"Stop it with `tempi stop {short}` (its file stays), then run this command again, "
        f"or leave out the flag to use it as it is."
    )
    if "sandbox" in fixed and _sandbox_of(running) != _sandbox_of(wanted):
        raise SessionMismatch(
            f"Session {short} is running with --sandbox {_sandbox_of(running)}; a running session's "
            f"tools cannot move to --sandbox {_sandbox_of(wanted)}. {how}"
        )
    if "tools" in fixed and sorted(running.tools) != sorted(wanted.tools):
        raise SessionMismatch(
            f"Session {short} is running with tools {', '.join(running.tools) or '(none)'}; a running "
            f"session's tools cannot change to {', '.join(wanted.tools) or '(none)'}. {how}"
        )
    state = await session.state()
    await take_in_file_news(session, state)
    model, level = state.model, state.thinking_level
    if override_model and (model.provider, model.id) != (wanted.model.provider, wanted.model.id):
        model = wanted.model
        level = await session.set_model(model, remember=False)
        requested = clamp_level(model, wanted.thinking_level)
        if level != requested:
            # Not set_thinking_level: it clamps to the state's model, which may not show the switch yet.
            await session.handle.signal(AgentSessionWorkflow.set_thinking_level, requested)
            level = requested
    session.config = running.model_copy(update={"model": model, "thinking_level": level})
    session.session_path = running.session_path
