"""Which session a run uses: new, continued, resumed from a list, forked or throwaway."""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from temporalio.service import RPCError

from tempi.cli.errors import UserError
from tempi.client import FindModel, SessionClient, SessionMismatch, SessionOptions, SessionService
from tempi.client.forking import fork_session_file
from tempi.config.settings import Settings
from tempi.store import catalog
from tempi.store.errors import SessionFileError
from tempi.store.session_store import SessionStore
from tempi.workflows.session_types import SessionConfig


@dataclass
class OpenSession:
    """The session a front end shows, and what to clean up when it leaves it."""

    session: SessionClient
    # --no-session: the directory to remove when the run is over.
    throwaway_dir: Path | None = None
    # Its workflow was started here just now, so its event log holds nothing from before.
    started_here: bool = False

    @property
    def config(self) -> SessionConfig:
        # Front ends open sessions only by starting or resuming them, which sets it.
        assert self.session.config is not None
        return self.session.config

    async def close(self) -> None:
        """A throwaway session ends with its front end; a kept one goes on running."""
        if self.throwaway_dir is None:
            return
        with contextlib.suppress(RPCError):
            await self.session.shutdown()
        shutil.rmtree(self.throwaway_dir, ignore_errors=True)


async def reopen_if_closed(
    service: SessionService, opened: OpenSession, options: SessionOptions, find_model: FindModel
) -> OpenSession | None:
    """The session continued from its file when its workflow has closed (it waited past its
    idle time, `sessionIdleCloseMinutes`), for a front end still showing it; None while it
    runs. A throwaway session's directory passes to the continued one."""
    if await opened.session.is_running():
        return None
    try:
        session = await service.resume(Path(opened.config.session_path), options, find_model=find_model)
    except (SessionFileError, SessionMismatch) as err:
        raise UserError(str(err)) from err
    reopened = OpenSession(session, opened.throwaway_dir)
    opened.throwaway_dir = None
    return reopened


def find_session_path(store: SessionStore, reference: str, session_dir: Path | None = None) -> Path:
    """By file, id or id prefix; a `sessionDir`'s sessions are looked at first, as in pi."""
    try:
        return store.find_session(reference, session_dir)
    except SessionFileError as err:
        raise UserError(f"{err}. List sessions with `tempi sessions list`.") from err


def pick_session(store: SessionStore, cwd: Path, session_dir: Path | None = None) -> Path:
    """A numbered list of this directory's sessions (a sessionDir's, if set) to choose from
    (needs a terminal)."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise UserError("--resume needs a terminal to choose in; name the session with --session ID instead.")
    sessions = (catalog.list_sessions_in(session_dir) if session_dir else store.list_sessions(str(cwd)))[:20]
    if not sessions:
        raise UserError(f'No sessions in {cwd} yet. Start one with tempi -p "...".')
    for number, s in enumerate(sessions, 1):
        title = s.name or (s.first_message or "").replace("\n", " ")[:60]
        when = s.modified.astimezone().strftime("%Y-%m-%d %H:%M")
        print(f"{number:3}. {when}  {s.id[:8]}  {s.message_count:4} msgs  {title}", file=sys.stderr)
    while True:
        print(
            f"Session to continue [1-{len(sessions)}, empty to cancel]: ", end="", file=sys.stderr, flush=True
        )
        answer = sys.stdin.readline().strip()
        if not answer:
            raise UserError("No session chosen.")
        if answer.isdigit() and 1 <= int(answer) <= len(sessions):
            return sessions[int(answer) - 1].path
        print(f"Type a number from 1 to {len(sessions)}.", file=sys.stderr)


def _new_session_file(reference: str) -> Path | None:
    """The file to start a session in when `--session` names a path (pi's test: a `/` or
    `.jsonl` in it) and nothing is there yet; None otherwise."""
    if not ("/" in reference or "\\" in reference or reference.endswith(".jsonl")):
        return None
    path = Path(reference).expanduser().absolute()
    return None if path.exists() else path


def session_dir_for(args: argparse.Namespace, settings: Settings, cwd: Path) -> Path | None:
    if args.session_dir:
        return Path(args.session_dir).expanduser().resolve()
    return settings.session_dir_path(cwd)


@dataclass
class SessionChoice:
    """What the flags chose, settled before any server is contacted."""

    existing: Path | None  # a file to continue (for --fork, the new copy)
    session_dir: Path | None
    throwaway: bool = False
    # --session NEW.jsonl: the file a new session is started in, as pi does.
    new_file: Path | None = None


def session_folder(choice: SessionChoice, store: SessionStore, cwd: Path) -> Path | None:
    """Where the chosen session's file is or will be (None: a throwaway session)."""
    if choice.throwaway:
        return None
    if choice.existing is not None:
        return choice.existing.parent
    if choice.new_file is not None:
        return choice.new_file.parent
    return choice.session_dir or store.session_dir_for(cwd)


def choose_session(
    store: SessionStore, args: argparse.Namespace, settings: Settings, cwd: Path
) -> SessionChoice:
    chosen = [
        flag
        for flag, on in (
            ("--continue", args.continue_),
            ("--resume", args.resume),
            ("--session", args.session),
            ("--fork", args.fork),
            ("--no-session", args.no_session),
        )
        if on
    ]
    if len(chosen) > 1:
        raise UserError(f"{' and '.join(chosen)} cannot be used together; pick one.")
    session_dir = session_dir_for(args, settings, cwd)
    if args.no_session:
        return SessionChoice(None, None, throwaway=True)
    if args.session:
        if (new_file := _new_session_file(args.session)) is not None:
            return SessionChoice(None, session_dir, new_file=new_file)
        return SessionChoice(find_session_path(store, args.session, session_dir), session_dir)
    if args.continue_:
        # With a sessionDir, pi continues the newest session there, whatever its directory.
        path = catalog.most_recent_in(session_dir) if session_dir else store.most_recent(str(cwd))
        if path is None:
            where = session_dir or cwd
            raise UserError(f'No earlier session in {where} to continue. Start one with tempi -p "...".')
        return SessionChoice(path, session_dir)
    if args.resume:
        return SessionChoice(pick_session(store, cwd, session_dir), session_dir)
    if args.fork:
        source = find_session_path(store, args.fork, session_dir)
        try:
            leaf = store.load(source).tree.leaf_id
        except SessionFileError as err:
            raise UserError(str(err)) from err
        return SessionChoice(fork_session_file(store, source, leaf, session_dir=session_dir), session_dir)
    return SessionChoice(None, session_dir)


async def open_session(
    service: SessionService,
    choice: SessionChoice,
    options: SessionOptions,
    *,
    override_model: bool,
    find_model: FindModel,
    fixed: list[str] | None = None,
) -> OpenSession:
    """`fixed`: options chosen by flag that a running session must already have (see
    SessionService.resume)."""
    if choice.throwaway:
        throwaway = Path(tempfile.mkdtemp(prefix="tempi-no-session-"))
        return OpenSession(await service.start(options, session_dir=throwaway), throwaway, started_here=True)
    if choice.existing is None:
        return OpenSession(
            await service.start(options, session_dir=choice.session_dir, session_file=choice.new_file),
            started_here=True,
        )
    try:
        for warning in service.store.load_for_resume(choice.existing).warnings:
            print(f"tempi: warning: {warning}", file=sys.stderr)
        session = await service.resume(
            choice.existing, options, override_model=override_model, find_model=find_model, fixed=fixed or ()
        )
    except (SessionFileError, SessionMismatch) as err:
        raise UserError(str(err)) from err
    return OpenSession(session)
