"""pi's /clone (the session as it is now, in a new file) and /import (a session file from
elsewhere, copied into the sessions folder and continued)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tempi.cli.interactive.extras_host import ExtrasHost
from tempi.cli.interactive.render import notice
from tempi.cli.session_choice import OpenSession
from tempi.client import SessionOptions
from tempi.store.errors import SessionFileError
from tempi.store.modes import create_private_file, make_private_dirs


async def _options_now(app: ExtrasHost) -> SessionOptions:
    state = await app.session.state()
    options = app.planned.options
    options.model, options.thinking_level = state.model, state.thinking_level
    return options


async def cmd_clone(app: ExtrasHost, arg: str) -> None:
    state = await app.session.state()
    if state.leaf_id is None or not Path(state.session_file).is_file():
        await app.show(notice("Nothing to clone yet: send a message first.", "yellow"))
        return
    session = await app.service.fork(
        Path(state.session_file),
        state.leaf_id,
        await _options_now(app),
        session_dir=app.session_dir,
        find_model=app.planned.registry.find,
    )
    await app.use_session(OpenSession(session), history=True)
    await app.show(
        notice(
            f"Cloned to new session {session.session_id[:8]}; session {state.session_id[:8]} stays as it was.",
            "green",
        )
    )


async def cmd_import(app: ExtrasHost, arg: str) -> None:
    if not arg:
        await app.show(notice("Usage: /import <path.jsonl>", "red"))
        return
    source = (app.cwd / Path(arg).expanduser()).resolve()
    if not source.is_file():
        await app.show(notice(f"Failed to import session: no file {source}", "red"))
        return
    folder = app.session_dir or app.service.store.session_dir_for(app.cwd)
    target = folder / source.name
    copied = target.resolve() != source
    if copied:
        if target.exists():
            await app.show(notice(f"Not imported: {target} already exists (open it with /resume).", "red"))
            return
        make_private_dirs(folder)
        with (
            source.open("rb") as src,
            open(create_private_file(target, os.O_WRONLY | os.O_EXCL), "wb") as out,
        ):
            shutil.copyfileobj(src, out)
    try:
        session = await app.service.resume(
            target, await _options_now(app), find_model=app.planned.registry.find
        )
    except SessionFileError as err:
        if copied:
            target.unlink(missing_ok=True)  # not a session: leave nothing half-imported behind
        await app.show(notice(f"Failed to import session: {err}", "red"))
        return
    await app.use_session(OpenSession(session), history=True)
    await app.show(notice(f"Session imported from: {source}", "green"))
