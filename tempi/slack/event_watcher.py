"""mom's events directory, kept in step with Temporal: an immediate event is signalled at once,
a one-shot becomes an event workflow with a start delay, a periodic one a Schedule (cron and
time zone, no catch-up, overlapping firings skipped). Editing a file reschedules it, deleting
it cancels it. Temporal, not this process, holds what is scheduled."""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
    WorkflowExecutionStatus,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.service import RPCError

from tempi.activities.slack.event_delivery import deliver_event, events_dir
from tempi.slack.event_files import (
    MAX_EVENT_FILE_BYTES,
    BadEventFile,
    ImmediateEvent,
    OneShotEvent,
    PeriodicEvent,
    digest_of,
    event_detail,
    parse_event_file,
)
from tempi.workflows.slack_event_workflow import SlackEventWorkflow
from tempi.workflows.slack_types import SlackEventFire, event_id_prefix, event_workflow_id, slack_task_queue

log = logging.getLogger("tempi.slack.events")

POLL_S = 0.5
# mom gives a file that does not parse (often one still being written) three more reads.
PARSE_RETRIES_S = (0.1, 0.2, 0.4)
# Temporal's smallest catch-up window: a firing missed by more than this is skipped, not run late.
NO_CATCH_UP = timedelta(seconds=10)


@dataclass(frozen=True)
class _Seen:
    mtime_ns: int
    digest: str


def read_event_file(path: Path) -> bytes:
    """At most one byte more than an event file may have, however big the file is."""
    with path.open("rb") as handle:
        return handle.read(MAX_EVENT_FILE_BYTES + 1)


class EventWatcher:
    def __init__(
        self,
        temporal: Client,
        working_dir: str,
        bot_name: str,
        started_at: float,
        channel_allowed: Callable[[str], Awaitable[bool]] | None = None,
    ) -> None:
        """`channel_allowed`: whether events may name a channel (`--allow-channels`)."""
        self.temporal = temporal
        self.channel_allowed = channel_allowed
        self.working_dir = working_dir
        self.bot_name = bot_name
        self.started_at = started_at
        self.dir = events_dir(working_dir)
        self.known: dict[str, _Seen] = {}

    async def run(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        await self._drop_orphan_schedules()
        while True:
            try:
                await self.sync()
            except Exception:
                log.exception("could not bring the events directory into Temporal")
            await asyncio.sleep(POLL_S)

    async def sync(self) -> None:
        present: dict[str, Path] = {p.name: p for p in self.dir.glob("*.json") if p.is_file()}
        for name in [n for n in self.known if n not in present]:
            del self.known[name]
            await self.cancel(name)
        for name, path in sorted(present.items()):
            try:
                mtime_ns = path.stat().st_mtime_ns
            except FileNotFoundError:
                continue
            seen = self.known.get(name)
            if seen is not None and seen.mtime_ns == mtime_ns:
                continue
            await self._on_file(name, path, mtime_ns)

    async def _on_file(self, name: str, path: Path, mtime_ns: int) -> None:
        raw = b""
        event: ImmediateEvent | OneShotEvent | PeriodicEvent | None = None
        for wait in (0.0, *PARSE_RETRIES_S):
            await asyncio.sleep(wait)
            try:
                raw = read_event_file(path)
                event = parse_event_file(raw)
                break
            except FileNotFoundError:
                return
            except (BadEventFile, OSError) as err:
                problem = str(err)
        if event is None:
            log.warning("deleting events/%s: %s", name, problem)
            path.unlink(missing_ok=True)
            return
        if self.channel_allowed is not None and not await self.channel_allowed(event.channel_id):
            log.warning("deleting events/%s: channel %s is not in --allow-channels", name, event.channel_id)
            path.unlink(missing_ok=True)
            return
        digest = digest_of(raw)
        if (seen := self.known.get(name)) is not None and seen.digest == digest:
            self.known[name] = _Seen(mtime_ns, digest)
            return  # touched, not changed
        self.known[name] = _Seen(mtime_ns, digest)
        fire = SlackEventFire(
            working_dir=self.working_dir,
            file=name,
            digest=digest,
            channel=event.channel_id,
            text=event.text,
            kind=event.type,
            detail=event_detail(event),
            bot_name=self.bot_name,
        )
        if isinstance(event, ImmediateEvent):
            await self._immediate(path, fire, mtime_ns)
        elif isinstance(event, OneShotEvent):
            await self._one_shot(path, fire, event)
        else:
            await self._periodic(fire, event)

    async def _immediate(self, path: Path, fire: SlackEventFire, mtime_ns: int) -> None:
        if mtime_ns / 1e9 < self.started_at:
            log.info("deleting events/%s unrun: it was written before this gateway started", fire.file)
        else:
            # Several gateways may see the same file: the same fire id makes them one message.
            await deliver_event(
                self.temporal, fire.model_copy(update={"fire_id": f"{fire.digest}-{mtime_ns}"})
            )
        path.unlink(missing_ok=True)

    async def _one_shot(self, path: Path, fire: SlackEventFire, event: OneShotEvent) -> None:
        wf_id = event_workflow_id(self.working_dir, fire.file)
        if await self._pending_one_shot(wf_id) == fire.digest:
            return  # already waiting in Temporal (scheduled by an earlier gateway)
        delay = event.when() - datetime.datetime.now(datetime.UTC)
        if delay <= timedelta(0):
            log.info("deleting events/%s: its time %s has passed", fire.file, event.at)
            path.unlink(missing_ok=True)
            return
        await self.temporal.start_workflow(
            SlackEventWorkflow.run,
            fire.model_copy(update={"due_at": event.when().isoformat()}),
            id=wf_id,
            task_queue=slack_task_queue(self.working_dir),
            start_delay=delay,
            memo={"digest": fire.digest},
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.TERMINATE_EXISTING,
        )
        log.info("events/%s: one-shot at %s", fire.file, event.at)

    async def _pending_one_shot(self, wf_id: str) -> str | None:
        """The digest of the file a running one-shot workflow was made from, if one runs."""
        try:
            desc = await self.temporal.get_workflow_handle(wf_id).describe()
        except RPCError:
            return None
        if desc.status != WorkflowExecutionStatus.RUNNING:
            return None
        digest = (await desc.memo()).get("digest")
        return str(digest) if digest else None

    def _schedule(self, fire: SlackEventFire, event: PeriodicEvent) -> Schedule:
        return Schedule(
            action=ScheduleActionStartWorkflow(
                SlackEventWorkflow.run,
                fire,
                id=event_workflow_id(self.working_dir, fire.file),
                task_queue=slack_task_queue(self.working_dir),
            ),
            spec=ScheduleSpec(cron_expressions=[event.temporal_cron()], time_zone_name=event.timezone),
            policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP, catchup_window=NO_CATCH_UP),
            # The note says which version of the file the schedule was made from.
            state=ScheduleState(note=fire.digest),
        )

    async def _periodic(self, fire: SlackEventFire, event: PeriodicEvent) -> None:
        schedule_id = event_workflow_id(self.working_dir, fire.file)
        schedule = self._schedule(fire, event)
        handle = self.temporal.get_schedule_handle(schedule_id)
        try:
            current = await handle.describe()
        except RPCError:
            try:
                await self.temporal.create_schedule(schedule_id, schedule)
            except ScheduleAlreadyRunningError:
                # Another gateway watching this directory made it first; it may be of an older file.
                current = await handle.describe()
            else:
                log.info("events/%s: periodic %s (%s)", fire.file, event.schedule, event.timezone)
                return
        if current.schedule.state.note == fire.digest:
            return

        def replace(_: ScheduleUpdateInput) -> ScheduleUpdate:
            return ScheduleUpdate(schedule=schedule)

        await handle.update(replace)
        log.info("events/%s: rescheduled to %s (%s)", fire.file, event.schedule, event.timezone)

    async def cancel(self, name: str) -> None:
        """A deleted file: its schedule or pending one-shot goes too."""
        target = event_workflow_id(self.working_dir, name)
        try:
            await self.temporal.get_schedule_handle(target).delete()
            log.info("events/%s deleted: schedule removed", name)
        except RPCError:
            pass
        if await self._pending_one_shot(target) is not None:
            try:
                await self.temporal.get_workflow_handle(target).terminate(reason=f"events/{name} was deleted")
                log.info("events/%s deleted: one-shot cancelled", name)
            except RPCError:
                pass

    async def _drop_orphan_schedules(self) -> None:
        """Schedules of files deleted while no gateway watched."""
        prefix = event_id_prefix(self.working_dir)
        try:
            async for listed in await self.temporal.list_schedules():
                name = listed.id.removeprefix(prefix)
                if listed.id.startswith(prefix) and not (self.dir / name).exists():
                    await self.cancel(name)
        except RPCError:
            log.exception("could not list schedules; schedules of deleted event files may remain")
