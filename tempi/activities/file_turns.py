"""Turns another program (pi) appended to a session file behind tempi's back.

The file is the truth. A workflow remembers the leaf it last wrote, so when pi has
continued the file since, the next batch of tempi's entries (a prompt, a model change)
moves onto the file's latest entry instead of forking from the remembered one. Nothing
the workflow issues changes: the batch keeps its ids, only its first parentId moves, so
the workflow's leaf (the batch's last entry) now descends from pi's turn.

A batch that cannot move (tool results answering a call on tempi's branch, a retried
model call) means the file changed in the middle of a run; the model call then stops
with SESSION_FILE_CHANGED instead of writing a branch nobody asked for.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from temporalio.exceptions import ApplicationError

from tempi.store.known_end import KnownEnd, Line, lines_from, read_marker, write_marker
from tempi.workflows.activity_payloads import OutboxItem, SessionFileRef

SESSION_FILE_CHANGED = "SessionFileChanged"


def file_changed(path: str) -> ApplicationError:
    return ApplicationError(
        f"The session file {path} was changed by another program (pi?) while tempi was working on "
        "it, so tempi stopped instead of writing a branch beside the new turns. Send your prompt "
        "again: tempi continues from the file's latest entry.",
        type=SESSION_FILE_CHANGED,
        non_retryable=True,
    )


def outbox_ids(outbox: Iterable[OutboxItem]) -> list[str]:
    ids: list[str] = []
    for item in outbox:
        if item.entry is not None:
            ids.append(str(item.entry["id"]))
        elif item.pending_id is not None:
            ids.append(item.pending_id)
    return ids


def movable(outbox: list[OutboxItem]) -> bool:
    """Whether the batch is one chain of workflow-made entries hanging off one parent, with
    no tool result (which must stay under the call it answers)."""
    previous: str | None = None
    for index, item in enumerate(outbox):
        entry = item.entry
        if entry is None:
            return False
        message = entry.get("message")
        if isinstance(message, dict) and message.get("role") == "toolResult":
            return False
        if index > 0 and entry.get("parentId") != previous:
            return False
        previous = str(entry["id"])
    return bool(outbox)


class FileTurns:
    """One activity's view of the lines of its session file that are not tempi's."""

    def __init__(self, ref: SessionFileRef, ours: Iterable[str], anchor: str | None) -> None:
        self.path = ref.session_path
        self.session_id = ref.session_id
        self.ours = set(ours)
        self.taken_in: set[str] = set()
        self.known = read_marker(self.path, self.session_id) or _assumed_known(self.path, anchor)

    def foreign(self) -> list[Line]:
        """Entry lines appended since tempi last looked that are neither its own nor taken in."""
        try:
            _, lines = lines_from(self.path, self.known.size)
        except FileNotFoundError:
            return []
        return [line for line in lines if not self._accounted(line.entry_id)]

    def continue_from_file(self, outbox: list[OutboxItem]) -> tuple[list[OutboxItem], bool]:
        """The batch, moved onto the file's latest entry when another program appended turns
        since tempi last wrote; False when it cannot move (the file changed mid-run)."""
        foreign = self.foreign()
        if not foreign:
            return outbox, True
        if not movable(outbox):
            return outbox, False
        self.taken_in.update(line.entry_id for line in foreign)
        first = outbox[0].entry
        assert first is not None
        moved = OutboxItem(entry={**first, "parentId": foreign[-1].entry_id})
        return [moved, *outbox[1:]], True

    def settle(self, *also_ours: str) -> None:
        """Record how far the file is accounted for, now that tempi has written to it: past
        its own lines and those taken in, up to the first line of someone else's that no
        batch has continued from (which the next batch then sees)."""
        self.ours.update(also_ours)
        try:
            inode, lines = lines_from(self.path, self.known.size)
        except FileNotFoundError:
            return
        size, own, blocked = self.known.size, [], False
        for line in lines:
            if not self._accounted(line.entry_id):
                blocked = True
            elif blocked:
                own.append(line.entry_id)
            else:
                size = line.end
        self.known = KnownEnd(inode=inode, size=size, own=own)
        write_marker(self.path, self.session_id, self.known)

    def _accounted(self, entry_id: str) -> bool:
        return entry_id in self.ours or entry_id in self.taken_in or entry_id in self.known.own


def _assumed_known(path: str, anchor: str | None) -> KnownEnd:
    """A file without a marker (written before markers existed): what follows the entry the
    workflow continues from is news; with no such entry, nothing is."""
    try:
        inode, lines = lines_from(path, 0)
        size = Path(path).stat().st_size
    except FileNotFoundError:
        return KnownEnd(inode=0, size=0)
    for line in lines:
        if anchor is not None and line.entry_id == anchor:
            return KnownEnd(inode=inode, size=line.end)
    return KnownEnd(inode=inode, size=size)


def anchor_of(outbox: list[OutboxItem], leaf_id: str | None) -> str | None:
    """The entry a batch continues from: its first entry's parent, else the workflow's leaf."""
    if outbox and outbox[0].entry is not None:
        parent = outbox[0].entry.get("parentId")
        return parent if isinstance(parent, str) else None
    return leaf_id
