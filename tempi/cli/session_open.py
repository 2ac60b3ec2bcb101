"""Which session a run uses: new, continued, resumed from a list, forked or throwaway."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle

from tempi.cli.errors import UserError
from tempi.cli.forking import fork_session_file
from tempi.cli.sessions import SessionPlan, resume_session, start_new_session
from tempi.config.settings import Settings
from tempi.store.errors import SessionFileError
from tempi.store.session_store import SessionStore
from tempi.workflows.session_types import SessionConfig


@dataclass
class OpenSession:
    handle: WorkflowHandle[Any, Any]
    config: SessionConfig
    # --no-session: the directory to remove when the run is over.
    throwaway_dir: Path | None = None

    def cleanup(self) -> None:
        if self.throwaway_dir is not None:
            shutil.rmtree(self.throwaway_dir, ignore_errors=True)


def find_session_path(store: SessionStore, reference: str) -> Path:
    try:
        return store.find_session(reference)
    except SessionFileError as err:
        raise UserError(f"{err}. List sessions with `tempi sessions list`.") from err


def pick_session(store: SessionStore, cwd: Path) -> Path:
    """A numbered list of this directory's sessions to choose from (needs a terminal)."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise UserError("--resume needs a terminal to choose in; name the session with --session ID instead.")
    sessions = store.list_sessions(str(cwd))[:20]
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
        return SessionChoice(find_session_path(store, args.session), session_dir)
    if args.continue_:
        path = store.most_recent(str(cwd))
        if path is None:
            raise UserError(f'No earlier session in {cwd} to continue. Start one with tempi -p "...".')
        return SessionChoice(path, session_dir)
    if args.resume:
        return SessionChoice(pick_session(store, cwd), session_dir)
    if args.fork:
        source = find_session_path(store, args.fork)
        try:
            leaf = store.load(source).tree.leaf_id
        except SessionFileError as err:
            raise UserError(str(err)) from err
        return SessionChoice(fork_session_file(store, source, leaf, session_dir=session_dir), session_dir)
    return SessionChoice(None, session_dir)


async def open_session(
    client: Client, store: SessionStore, choice: SessionChoice, plan: SessionPlan, *, override_model: bool
) -> OpenSession:
    if choice.throwaway:
        throwaway = Path(tempfile.mkdtemp(prefix="tempi-no-session-"))
        handle, config = await start_new_session(client, store, plan, session_dir=throwaway)
        return OpenSession(handle, config, throwaway)
    if choice.existing is None:
        handle, config = await start_new_session(client, store, plan, session_dir=choice.session_dir)
        return OpenSession(handle, config)
    try:
        handle, config = await resume_session(
            client, store, choice.existing, plan, override_model=override_model
        )
    except SessionFileError as err:
        raise UserError(str(err)) from err
    return OpenSession(handle, config)
