"""The user's messages waiting for the agent: new prompts, steering (taken at the next
turn) and follow-ups (taken when the run would stop), with pi's queue modes."""

from __future__ import annotations

from typing import Literal

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from tempi.agent.messages import UserMessage
    from tempi.workflows.activity_payloads import QueuedMessages
    from tempi.workflows.session.event_log import EventLog
    from tempi.workflows.session_types import CarriedState, QueueMode

QueueName = Literal["steering", "follow_up"]
StreamingBehavior = Literal["steer", "followUp"]


class MessageQueues:
    def __init__(self, state: CarriedState, log: EventLog) -> None:
        self.state = state
        self.log = log

    def submit(self, message: UserMessage, behavior: StreamingBehavior | None, *, streaming: bool) -> None:
        """A prompt from a client: while a run streams it steers or follows up as asked,
        otherwise it waits for the next run."""
        if streaming and behavior == "steer":
            self.add(message, "steering")
        elif streaming and behavior == "followUp":
            self.add(message, "follow_up")
        else:
            self.state.prompts.append(message)

    def has_prompts(self) -> bool:
        return bool(self.state.prompts)

    def next_prompt(self) -> UserMessage:
        return self.state.prompts.pop(0)

    def has_steering(self) -> bool:
        return bool(self.state.steering)

    def has_follow_up(self) -> bool:
        return bool(self.state.follow_up)

    def pending_count(self) -> int:
        return len(self.state.steering) + len(self.state.follow_up)

    def take(self, which: QueueName) -> list[UserMessage]:
        """Dequeue per the queue's mode (one at a time, or all), announcing what is left."""
        queue = self._queue(which)
        mode: QueueMode = self.state.steering_mode if which == "steering" else self.state.follow_up_mode
        if not queue:
            return []
        taken = list(queue) if mode == "all" else [queue[0]]
        del queue[: len(taken)]
        self.announce()
        return taken

    def add(self, message: UserMessage, which: QueueName) -> None:
        self._queue(which).append(message)
        self.announce()

    def add_or_start(self, message: UserMessage, which: QueueName, *, streaming: bool) -> None:
        if streaming:
            self.add(message, which)
        else:
            # Nothing is running: a steer or follow-up from another terminal starts a run.
            self.state.prompts.append(message)

    def clear(self) -> QueuedMessages:
        """Empty both queues and return their texts, as pi's clearQueue (which always
        announces the now empty queue)."""
        taken = QueuedMessages(
            steering=[m.text() for m in self.state.steering],
            follow_up=[m.text() for m in self.state.follow_up],
        )
        self.state.steering.clear()
        self.state.follow_up.clear()
        self.announce()
        return taken

    def announce(self) -> None:
        self.log.emit(
            {
                "type": "queue_update",
                "steering": [m.text() for m in self.state.steering],
                "followUp": [m.text() for m in self.state.follow_up],
            }
        )

    def _queue(self, which: QueueName) -> list[UserMessage]:
        return self.state.steering if which == "steering" else self.state.follow_up
