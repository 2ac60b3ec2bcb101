"""The entry writer: ids for new entries, the outbox of entries not yet in the session
file, and the flush that writes them, one writer of the file at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from tempi.agent.session_entries import iso_timestamp, sequential_entry_id
    from tempi.workflows import activity_names as act
    from tempi.workflows.activity_payloads import FlushInput, OutboxItem, SessionFileRef
    from tempi.workflows.session.activity_options import Activities
    from tempi.workflows.session_types import CarriedState, SessionConfig


# Entries recorded while an activity writes on the current leaf follow its entries.
ONE_CHAIN = "entries-after-in-flight-write"


def now_ms() -> int:
    return int(workflow.now().timestamp() * 1000)


class EntryWriter:
    def __init__(self, config: SessionConfig, state: CarriedState, activities: Activities) -> None:
        self.state = state
        self.activities = activities
        self.outbox: list[OutboxItem] = []
        # Stream keys of messages and tool calls whose partial updates the store may drop
        # once the next write has landed.
        self.live_keys: list[str] = []
        self.made_ids: set[str] = set()
        # Activities in flight that write entries below the current leaf, and what was
        # recorded meanwhile (body, id), waiting to follow them: see writing_below_leaf.
        self.writers_in_flight = 0
        self.held: list[tuple[dict[str, Any], str]] = []
        # Writers of the session file take turns, so entries land in tree order.
        self.store_lock = asyncio.Lock()
        self.file_ref = SessionFileRef(
            session_id=config.session_id,
            session_path=config.session_path,
            cwd=config.cwd,
            parent_session=config.parent_session,
            header_timestamp=config.created_at,
            sandbox=config.sandbox,
            container_name=config.sandbox_container,
            existing_file=config.existing_file,
        )

    def file(self) -> SessionFileRef:
        return self.file_ref.model_copy()

    def new_id(self) -> str:
        while True:
            if workflow.patched("sequential-entry-ids"):
                # Random ids could repeat one from an earlier run, which the store
                # would then take for a retried write and drop.
                if self.state.entry_id_seed is None:
                    self.state.entry_id_seed = workflow.random().getrandbits(32)
                candidate = sequential_entry_id(self.state.entry_id_seed, self.state.entry_ids_made)
                self.state.entry_ids_made += 1
            else:
                candidate = workflow.uuid4().hex[:8]
            if candidate not in self.made_ids:
                self.made_ids.add(candidate)
                return candidate

    def entry(self, body: dict[str, Any], entry_id: str, parent_id: str | None) -> dict[str, Any]:
        return {
            "type": body["type"],
            "id": entry_id,
            "parentId": parent_id or None,
            "timestamp": iso_timestamp(now_ms()),
            **{k: v for k, v in body.items() if k != "type"},
        }

    def record(self, body: dict[str, Any], entry_id: str | None = None) -> str:
        """Queue a workflow-made entry as the new leaf, after the entries of an activity
        writing below the current leaf if one is in flight."""
        entry_id = entry_id or self.new_id()
        if self.writers_in_flight and workflow.patched(ONE_CHAIN):
            self.made_ids.add(entry_id)
            self.held.append((body, entry_id))
            return entry_id
        self.place(body, entry_id)
        return entry_id

    def place(self, body: dict[str, Any], entry_id: str) -> None:
        """Queue an entry as the new leaf now: also the one an activity failed to write,
        in the place it had."""
        self.outbox.append(OutboxItem(entry=self.entry(body, entry_id, self.state.leaf_id)))
        self.state.leaf_id = entry_id
        self.made_ids.add(entry_id)

    @contextmanager
    def writing_below_leaf(self) -> Iterator[None]:
        """Around an activity that writes entries whose parent is the current leaf, fixed in
        its input so that a retry writes the same ones (a model call, a tool batch, a
        compaction, a branch summary); inside, mark its entries written or place them.

        A client can add an entry meanwhile: a rename, a model or thinking-level switch, an
        extension's custom entry, a prompt's message during a compaction. Given the current
        leaf as parent, it would start a branch beside the activity's entries, and being
        written last it would be the file's leaf: reopened, the session would lack the
        answer or the tool results. pi appends such an entry at once and its answer below
        it, but here the answer's parent is already chosen, so the entry waits and follows
        the activity's entries instead: one chain still, the activity's entries on it. The
        setting itself takes effect at once; only its entry waits."""
        self.writers_in_flight += 1
        try:
            yield
        finally:
            self.writers_in_flight -= 1
            if not self.writers_in_flight:
                held, self.held = self.held, []
                for body, entry_id in held:
                    self.place(body, entry_id)

    def queued_bodies(self) -> list[dict[str, Any]]:
        """What is recorded and not yet written, in tree order."""
        return [item.entry for item in self.outbox if item.entry is not None] + [b for b, _ in self.held]

    def record_message(self, message: dict[str, Any]) -> str:
        return self.record({"type": "message", "message": message})

    def take_outbox(self) -> list[OutboxItem]:
        """Hand the outbox to an activity that writes it before its own entry."""
        outbox, self.outbox = self.outbox, []
        return outbox

    def put_back(self, outbox: list[OutboxItem]) -> None:
        """An activity failed without answering; its outbox may not have been written, so it
        goes out again (writes are idempotent) ahead of anything queued since."""
        self.outbox = outbox + self.outbox

    def written(self, leaf_id: str | None = None) -> None:
        """An activity wrote the file; with leaf_id, its own entry is the new leaf."""
        self.state.file_started = True
        self.file_ref.existing_file = True
        if leaf_id is not None:
            self.state.leaf_id = leaf_id
            self.made_ids.add(leaf_id)

    def place_tool_results(self, slots: list[tuple[str, str]], inline: list[dict[str, Any] | None]) -> None:
        """Queue one batch's results in call order: inline ones as entries, the rest as
        references to what their activity already stored."""
        for (entry_id, parent_id), message in zip(slots, inline, strict=True):
            if message is not None:
                body = {"type": "message", "message": message}
                self.outbox.append(OutboxItem(entry=self.entry(body, entry_id, parent_id)))
            else:
                self.outbox.append(OutboxItem(pending_id=entry_id))
        self.state.leaf_id = slots[-1][0]
        self.made_ids.update(entry_id for entry_id, _ in slots)

    def idle_writes_waiting(self, streaming: bool) -> bool:
        # Like pi, nothing reaches the file before the first assistant message.
        return bool(self.outbox) and self.state.file_started and not streaming

    async def flush(self) -> None:
        if not self.outbox and not self.live_keys:
            return
        async with self.store_lock:
            await self.flush_locked()

    async def flush_locked(self) -> None:
        outbox, self.outbox = self.outbox, []
        keys, self.live_keys = self.live_keys, []
        try:
            await self.activities.execute(
                act.FLUSH_ENTRIES, FlushInput(file=self.file(), outbox=outbox, finished_live_keys=keys)
            )
        except ActivityError:
            # The entries stay queued and go out with the next write; nothing is lost.
            self.outbox = outbox + self.outbox
            self.live_keys = keys + self.live_keys
            return
        if outbox:
            self.written()
