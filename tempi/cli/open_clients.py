"""Which sessions are open in a terminal on this machine, so that `tempi server stop` can
say whom it would cut off. A front end showing a session keeps a small file about it in
the tempi home (`run/clients/<pid>.json`); a file whose process is gone counts for nothing."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ValidationError


class OpenClient(BaseModel):
    pid: int
    # The process's start time (clock ticks since boot): a recycled pid is not this client.
    started: int
    session_id: str
    cwd: str
    session_file: str | None = None
    mode: str


def clients_dir(home: Path) -> Path:
    return home / "run" / "clients"


def _start_ticks(pid: int) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


class ClientMark:
    """This process's mark: what it shows now, rewritten when it shows another session."""

    def __init__(self, home: Path, mode: str) -> None:
        self.path = clients_dir(home) / f"{os.getpid()}.json"
        self.mode = mode

    def show(self, session_id: str, cwd: str, session_file: str | None) -> None:
        started = _start_ticks(os.getpid())
        if started is None:
            return
        mark = OpenClient(
            pid=os.getpid(),
            started=started,
            session_id=session_id,
            cwd=cwd,
            session_file=session_file,
            mode=self.mode,
        )
        with contextlib.suppress(OSError):  # a mark that cannot be written only loses a warning
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(mark.model_dump_json())
            os.replace(tmp, self.path)

    def clear(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()


@contextlib.contextmanager
def marked_open(
    home: Path, mode: str, session_id: str, cwd: str, session_file: str | None
) -> Iterator[ClientMark]:
    mark = ClientMark(home, mode)
    mark.show(session_id, cwd, session_file)
    try:
        yield mark
    finally:
        mark.clear()


def open_clients(home: Path) -> list[OpenClient]:
    """The live front ends of this home; marks left by processes that died are removed."""
    found: list[OpenClient] = []
    folder = clients_dir(home)
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.json")):
        try:
            client = OpenClient.model_validate_json(path.read_text())
        except (OSError, ValidationError):
            continue
        if _start_ticks(client.pid) != client.started:
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        found.append(client)
    return found
