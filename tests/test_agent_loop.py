"""pi's agent loop through its port, in plain asyncio: a scripted model, tools that run in
the test, and the real tool scheduler, message queues and event log. No Temporal server,
so each case takes milliseconds (like pi's agent-loop tests with a mock stream)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tempi.agent.messages import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage
from tempi.agent.model_spec import ModelSpec
from tempi.workflows.activity_payloads import LlmCallResult
from tempi.workflows.session.agent_loop import AgentLoop
from tempi.workflows.session.compactor import CompactionReason
from tempi.workflows.session.event_log import EventLog
from tempi.workflows.session.queues import MessageQueues, QueueName
from tempi.workflows.session.texts import ABORTED_TEXT, OVERFLOW_RECOVERY_FAILED, SKIPPED_TEXT
from tempi.workflows.session.tool_routes import RouteResult, ToolRoutes, ToolSlot
from tempi.workflows.session.tool_scheduler import ToolScheduler
from tempi.workflows.session_types import CarriedState, ErrorKind, RunHandoff, SessionConfig

MODEL = ModelSpec(id="scripted", api="faux", provider="test", context_window=100_000)

# A scripted model answer; a callable sees the port first (to queue or abort mid-call).
Answer = LlmCallResult | Callable[["FakePort"], LlmCallResult]
# A tool run in the test: it may act on the port (queue a message, abort) and returns its text.
ToolFn = Callable[["FakePort", ToolCall], str]


def said(text: str) -> LlmCallResult:
    return LlmCallResult(message=_assistant([TextContent(text=text)]))


def calls(*names: str) -> LlmCallResult:
    blocks = [ToolCall(id=f"call-{i}", name=name, arguments={"n": i}) for i, name in enumerate(names)]
    return LlmCallResult(message=_assistant(blocks))


def failed(text: str, kind: ErrorKind, retry_after_ms: int | None = None) -> LlmCallResult:
    message = _assistant([])
    message.stop_reason = "error"
    message.error_message = text
    return LlmCallResult(message=message, error_kind=kind, retry_after_ms=retry_after_ms)


def _assistant(content: list[Any]) -> AssistantMessage:
    return AssistantMessage(
        content=content, api=MODEL.api, provider=MODEL.provider, model=MODEL.id, timestamp=1
    )


def user(text: str) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)], timestamp=1)


class InProcessToolRoute:
    """Runs every tool in the test process."""

    def __init__(self, port: FakePort, tools: dict[str, ToolFn]) -> None:
        self.port = port
        self.tools = tools

    def handles(self, tool_name: str) -> bool:
        return True

    async def prepare(self) -> str | None:
        return None

    async def run(self, call: ToolCall, slot: ToolSlot) -> RouteResult:
        text = self.tools[call.name](self.port, call)
        return RouteResult(
            ToolResultMessage(
                tool_call_id=call.id, tool_name=call.name, content=[TextContent(text=text)], timestamp=2
            )
        )


class FakePort:
    def __init__(
        self,
        answers: Sequence[Answer],
        tools: dict[str, ToolFn] | None = None,
        *,
        config: SessionConfig | None = None,
        compaction_works: bool = True,
    ) -> None:
        tools = tools or {}
        self.config = config or SessionConfig(session_id="s", session_path="/s.jsonl", cwd="/", model=MODEL)
        self.config.tools = list(tools)
        self.state = CarriedState(
            model=MODEL, thinking_level="off", steering_mode="one-at-a-time", follow_up_mode="one-at-a-time"
        )
        self.log = EventLog(self.state)
        self.queues = MessageQueues(self.state, self.log)
        self.scheduler = ToolScheduler(self.config, self, ToolRoutes(InProcessToolRoute(self, tools)))
        self.answers = list(answers)
        self.llm_calls = 0
        self.aborted = False
        self.streaming = False
        self.recorded: list[dict[str, Any]] = []
        self.sleeps: list[int] = []
        self.compactions: list[CompactionReason] = []
        self.compaction_works = compaction_works
        self.abort_on_sleep = False

    @property
    def events(self) -> list[dict[str, Any]]:
        return self.log.events

    def emit(self, event: dict[str, Any]) -> int:
        return self.log.emit(event)

    def emit_live(self, event: dict[str, Any], key: str) -> None:
        self.log.emit(event)

    def now_ms(self) -> int:
        return 5

    def begin_run(self) -> None:
        self.streaming = True

    def end_run(self) -> None:
        self.streaming = False

    async def after_run(self) -> None:
        return None

    async def call_llm(self) -> LlmCallResult:
        self.llm_calls += 1
        self.emit({"type": "message_start", "message": _assistant([]).to_json_dict()})
        answer = self.answers.pop(0)
        return answer(self) if callable(answer) else answer

    async def execute_tools(self, calls: list[ToolCall]) -> list[ToolResultMessage]:
        slots = [ToolSlot(entry_id=f"e{i}", parent_id=f"p{i}") for i in range(len(calls))]
        return [r.message for r in await self.scheduler.run(calls, slots)]

    def record_message(self, message: dict[str, Any]) -> None:
        self.recorded.append(message)

    def abort_requested(self) -> bool:
        return self.aborted

    def has_steering(self) -> bool:
        return self.queues.has_steering()

    def has_follow_up(self) -> bool:
        return self.queues.has_follow_up()

    def take_messages(self, which: QueueName) -> list[UserMessage]:
        return self.queues.take(which)

    async def sleep_unless_aborted(self, delay_ms: int) -> bool:
        self.sleeps.append(delay_ms)
        self.aborted = self.aborted or self.abort_on_sleep
        return not self.aborted

    async def compact(self, reason: CompactionReason, *, will_retry: bool) -> bool:
        self.compactions.append(reason)
        return self.compaction_works

    def hand_off_planned(self) -> bool | None:
        return False

    def should_hand_off(self, planned: bool | None) -> bool:
        return bool(planned)

    async def hand_off(self, handoff: RunHandoff) -> None:
        raise AssertionError("no hand-off in these runs")


async def run_loop(port: FakePort, prompt: str = "go") -> AgentLoop:
    loop = AgentLoop(port, port.config, port.state)
    await loop.run([user(prompt)])
    return loop


def types(port: FakePort) -> list[str]:
    return [e["type"] for e in port.events]


def of_type(port: FakePort, kind: str) -> list[dict[str, Any]]:
    return [e for e in port.events if e["type"] == kind]


def texts_of(message: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in message["content"] if isinstance(b, dict))


async def test_a_tool_turn_emits_pis_event_order() -> None:
    port = FakePort([calls("read"), said("The file says hi.")], {"read": lambda p, c: "hi"})
    loop = await run_loop(port)

    assert types(port) == [
        "agent_start",
        "turn_start",
        "message_start",  # the prompt
        "message_end",
        "message_start",  # the answer with the tool call
        "message_end",
        "tool_execution_start",
        "tool_execution_end",
        "message_start",  # the tool result
        "message_end",
        "turn_end",
        "turn_start",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    first_turn_end = of_type(port, "turn_end")[0]
    assert [texts_of(r) for r in first_turn_end["toolResults"]] == ["hi"]
    assert of_type(port, "agent_end")[0]["_messagesFrom"] == 0
    assert loop.last_message is not None and loop.last_message.text() == "The file says hi."
    stats = port.state.stats
    assert (stats.user_messages, stats.assistant_messages, stats.tool_calls, stats.tool_results) == (
        1,
        2,
        1,
        1,
    )
    # The prompt becomes an entry here; answers and tool results are written by their activities.
    assert [m["role"] for m in port.recorded] == ["user"]
    assert not port.streaming


async def test_retryable_errors_back_off_exponentially_then_succeed() -> None:
    port = FakePort([failed("overloaded", "retryable"), failed("overloaded", "retryable"), said("ok")])
    await run_loop(port)

    assert port.sleeps == [2000, 4000]
    starts = of_type(port, "auto_retry_start")
    assert [(e["attempt"], e["delayMs"], e["maxAttempts"]) for e in starts] == [(1, 2000, 3), (2, 4000, 3)]
    assert starts[0]["errorMessage"] == "overloaded"
    assert of_type(port, "auto_retry_end") == [{"type": "auto_retry_end", "success": True, "attempt": 2}]
    # Each failed attempt ends its run in the log; the retry starts a new one.
    assert types(port).count("agent_start") == 3
    assert types(port)[-1] == "agent_end"


async def test_retry_after_stretches_the_delay_and_retries_give_up_at_the_limit() -> None:
    port = FakePort(
        [failed("rate limited", "retryable", retry_after_ms=30_000)] + [failed("down", "retryable")] * 3
    )
    loop = await run_loop(port)

    assert port.sleeps == [30_000, 4000, 8000]
    assert port.llm_calls == 4
    assert of_type(port, "auto_retry_end") == [
        {"type": "auto_retry_end", "success": False, "attempt": 3, "finalError": "down"}
    ]
    assert loop.last_message is not None and loop.last_message.error_message == "down"


async def test_an_abort_during_the_backoff_cancels_the_retry() -> None:
    port = FakePort([failed("overloaded", "retryable"), said("unused")])
    port.abort_on_sleep = True
    await run_loop(port)

    assert port.llm_calls == 1
    assert of_type(port, "auto_retry_end") == [
        {"type": "auto_retry_end", "success": False, "attempt": 1, "finalError": "Retry cancelled"}
    ]


async def test_fatal_errors_are_not_retried() -> None:
    port = FakePort([failed("bad request", "fatal")])
    await run_loop(port)

    assert port.llm_calls == 1
    assert port.sleeps == []
    assert of_type(port, "auto_retry_start") == []
    assert types(port)[-3:] == ["message_end", "turn_end", "agent_end"]


async def test_an_overflow_compacts_once_and_retries() -> None:
    port = FakePort([failed("prompt is too long", "overflow"), said("fits now")])
    loop = await run_loop(port)

    assert port.compactions == ["overflow"]
    assert port.llm_calls == 2
    assert loop.last_message is not None and loop.last_message.text() == "fits now"


async def test_a_second_overflow_ends_the_run() -> None:
    port = FakePort([failed("too long", "overflow"), failed("still too long", "overflow"), said("unused")])
    loop = await run_loop(port)

    assert port.compactions == ["overflow"]
    assert port.llm_calls == 2
    assert of_type(port, "compaction_end") == [
        {
            "type": "compaction_end",
            "reason": "overflow",
            "aborted": False,
            "willRetry": False,
            "errorMessage": OVERFLOW_RECOVERY_FAILED,
        }
    ]
    assert loop.last_message is not None and loop.last_message.error_message == "still too long"


async def test_an_overflow_is_not_retried_when_compaction_fails() -> None:
    port = FakePort([failed("too long", "overflow"), said("unused")], compaction_works=False)
    await run_loop(port)

    assert port.compactions == ["overflow"]
    assert port.llm_calls == 1


async def test_steering_skips_the_remaining_tool_calls_in_sequential_mode() -> None:
    def bash(port: FakePort, call: ToolCall) -> str:
        if call.id == "call-0":
            port.queues.add(user("Stop, do something else."), "steering")
        return f"ran {call.id}"

    config = SessionConfig(
        session_id="s", session_path="/s.jsonl", cwd="/", model=MODEL, tool_execution="sequential"
    )
    port = FakePort(
        [calls("bash", "bash", "bash"), said("Doing something else.")], {"bash": bash}, config=config
    )
    await run_loop(port)

    ends = of_type(port, "tool_execution_end")
    assert [texts_of(e["result"]) for e in ends] == ["ran call-0", SKIPPED_TEXT, SKIPPED_TEXT]
    assert [e["isError"] for e in ends] == [False, True, True]
    # The steering message opens the next turn, announced by the dequeue.
    users = [e["message"] for e in of_type(port, "message_end") if e["message"]["role"] == "user"]
    assert [texts_of(m) for m in users] == ["go", "Stop, do something else."]
    second_turn = [i for i, kind in enumerate(types(port)) if kind == "turn_start"][1]
    turn_two = types(port)[second_turn:]
    assert turn_two[:3] == ["turn_start", "queue_update", "message_start"]
    assert of_type(port, "queue_update")[-1]["steering"] == []
    assert port.llm_calls == 2


async def test_parallel_tools_all_run_despite_steering() -> None:
    def bash(port: FakePort, call: ToolCall) -> str:
        if call.id == "call-0":
            port.queues.add(user("Stop."), "steering")
        return f"ran {call.id}"

    port = FakePort([calls("bash", "bash"), said("ok")], {"bash": bash})
    await run_loop(port)

    assert [texts_of(e["result"]) for e in of_type(port, "tool_execution_end")] == [
        "ran call-0",
        "ran call-1",
    ]


async def test_an_unknown_tool_is_answered_without_running() -> None:
    port = FakePort([calls("fly"), said("ok")], {"read": lambda p, c: "hi"})
    await run_loop(port)

    end = of_type(port, "tool_execution_end")[0]
    assert end["isError"] is True
    assert texts_of(end["result"]) == "Unknown tool 'fly'. Available tools: read."


async def test_abort_ends_the_run_with_an_aborted_message() -> None:
    def slow(port: FakePort, call: ToolCall) -> str:
        port.aborted = True
        return "partial"

    port = FakePort([calls("bash"), said("unused")], {"bash": slow})
    loop = await run_loop(port)

    assert port.llm_calls == 1
    assert types(port)[-6:] == [
        "turn_end",
        "turn_start",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    aborted = of_type(port, "turn_end")[-1]["message"]
    assert (aborted["stopReason"], aborted["errorMessage"]) == ("aborted", ABORTED_TEXT)
    assert port.recorded[-1] == aborted
    assert loop.last_message is not None and loop.last_message.stop_reason == "aborted"


async def test_a_follow_up_continues_the_run_after_it_would_stop() -> None:
    def answer_and_queue(port: FakePort) -> LlmCallResult:
        port.queues.add(user("And then this."), "follow_up")
        return said("First done.")

    port = FakePort([answer_and_queue, said("Follow-up done.")])
    loop = await run_loop(port)

    assert types(port).count("agent_start") == 1
    assert types(port).count("agent_end") == 1
    users = [e["message"] for e in of_type(port, "message_end") if e["message"]["role"] == "user"]
    assert [texts_of(m) for m in users] == ["go", "And then this."]
    assert loop.last_message is not None and loop.last_message.text() == "Follow-up done."
    assert port.state.stats.user_messages == 2


async def test_a_large_answer_compacts_at_the_threshold_after_the_run() -> None:
    big = said("big")
    big.message.usage.total_tokens = MODEL.context_window - 100
    port = FakePort([big])
    await run_loop(port)

    assert port.compactions == ["threshold"]
    assert types(port)[-1] == "agent_end"
