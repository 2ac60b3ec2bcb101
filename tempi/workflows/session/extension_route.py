"""Python extensions in a session: loaded once by an activity before the session's first
model call (what they registered is kept in the carried state), their before_agent_start
hooks run by an activity at the start of each run, their tools offered beside the builtin
ones and called on their own route, with the retry their declared effect allows. Their
tool_call and tool_result hooks run inside the tool activities, never here."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from tempi.agent.llm_context import ToolSpec
    from tempi.agent.messages import CustomMessage, TextContent, ToolCall, UserMessage
    from tempi.agent.session_entries import iso_timestamp
    from tempi.extensions.models import (
        ExtensionEffects,
        ExtensionProblem,
        ExtensionSetup,
        ExtensionTool,
        InjectedMessage,
    )
    from tempi.workflows import activity_names as act
    from tempi.workflows.activity_payloads import (
        AgentEndInput,
        AgentEndResult,
        AgentStartInput,
        AgentStartResult,
        ExtensionCallInput,
        ExtensionSetupInput,
    )
    from tempi.workflows.session.activity_errors import cause
    from tempi.workflows.session.activity_options import Activities, extension_tool_options
    from tempi.workflows.session.activity_tool import failed_result, run_tool_activity
    from tempi.workflows.session.entries import EntryWriter, now_ms
    from tempi.workflows.session.event_log import EventLog
    from tempi.workflows.session.queues import MessageQueues
    from tempi.workflows.session.run_control import RunControl
    from tempi.workflows.session.sandbox_lease import SandboxLease
    from tempi.workflows.session.texts import ABORTED_TEXT, sandbox_unavailable
    from tempi.workflows.session.tool_routes import RouteResult, ToolSlot
    from tempi.workflows.session_types import CarriedState, SessionConfig

# An extension's tool ran on the main queue's worker, away from the session's docker
# sandbox; now it runs on the sandbox's host, where its context reaches the container.
EXTENSION_TOOLS_IN_SANDBOX = "extension-tools-in-sandbox"
LOST_EXTENSION_TEXT = (
    "The worker running this extension tool stopped before it reported back, and the extension "
    "does not declare the tool read-only or idempotent, so it was not run again; it may or may not have run."
)


def _present(key: str, value: object) -> dict[str, object]:
    return {} if value is None else {key: value}


class ExtensionTools:
    def __init__(
        self,
        config: SessionConfig,
        state: CarriedState,
        log: EventLog,
        entries: EntryWriter,
        activities: Activities,
        queues: MessageQueues,
    ) -> None:
        self.config = config
        self.state = state
        self.log = log
        self.entries = entries
        self.activities = activities
        self.queues = queues

    async def ensure_loaded(self) -> None:
        if not self.config.extensions or self.state.extension_setup is not None:
            return
        try:
            setup: ExtensionSetup = await self.activities.execute(
                act.LOAD_EXTENSIONS,
                ExtensionSetupInput(extensions=self.config.extensions, file=self.entries.file()),
                ExtensionSetup,
            )
        except ActivityError as err:
            setup = ExtensionSetup(problems=[ExtensionProblem(extension="", error=cause(err))])
        effects, setup.effects = setup.effects, None
        start_problems, setup.start_problems = setup.start_problems, []
        self.state.extension_setup = setup
        self.report(setup.problems, "load")
        self.report(start_problems, "session_start")
        self.apply(effects)

    async def system_prompt(self, prompt: str) -> str:
        """The system prompt of the current run: what before_agent_start made of the
        configured one, asked once per run (kept across a hand-off)."""
        if not self.config.extensions:
            return self.config.system_prompt
        if self.state.extension_prompt_run != self.state.runs:
            self.state.extension_turn = 0
            self.state.extension_run_entry = self._run_entry()
            try:
                result: AgentStartResult = await self.activities.execute(
                    act.EXTENSIONS_BEFORE_AGENT_START,
                    AgentStartInput(
                        file=self.entries.file(),
                        extensions=self.active(),
                        prompt=prompt,
                        system_prompt=self.config.system_prompt,
                    ),
                    AgentStartResult,
                )
                self.state.extension_system_prompt = result.system_prompt
                self.report(result.problems, "before_agent_start")
                self.apply(result.effects)
                for injected in result.messages:
                    self._inject(injected)
            except ActivityError as err:
                self.state.extension_system_prompt = None
                self.report([ExtensionProblem(extension="", error=cause(err))], "before_agent_start")
            self.state.extension_prompt_run = self.state.runs
        return self.state.extension_system_prompt or self.config.system_prompt

    def _run_entry(self) -> str | None:
        """The run's prompt: its first user message, still in the outbox."""
        for item in self.entries.outbox:
            entry = item.entry or {}
            if entry.get("type") == "message" and (entry.get("message") or {}).get("role") == "user":
                return str(entry["id"])
        return None

    def next_turn(self) -> int:
        """The index of the run's turn that starts now (from 0)."""
        if not self.config.extensions:
            return 0
        self.state.extension_turn += 1
        return self.state.extension_turn - 1

    async def run_ended(self) -> None:
        """The run's last turn_end and its agent_end, in one activity once its entries are
        written (before the run stops streaming, so what the handlers appended is in the
        file when a client sees the run end); only for a run whose agent_start they saw."""
        setup = self.state.extension_setup
        if (
            not self.config.extensions
            or self.state.extension_prompt_run != self.state.runs
            or setup is None
            or not {"turn_end", "agent_end"} & set(setup.events)
            # Sessions begun before these events replay without them.
            or not workflow.patched("extension-agent-end")
        ):
            return
        await self.entries.flush()
        inp = AgentEndInput(
            file=self.entries.file(),
            extensions=self.active(),
            leaf_id=self.state.leaf_id,
            run_entry_id=self.state.extension_run_entry,
            last_turn=self.state.extension_turn - 1,
        )
        try:
            result: AgentEndResult = await self.activities.execute(
                act.EXTENSIONS_AGENT_END, inp, AgentEndResult
            )
        except ActivityError as err:
            self.report([ExtensionProblem(extension="", error=cause(err))], "agent_end")
            return
        self.report(result.problems, "agent_end")
        self.apply(result.effects)
        await self.entries.flush()

    def _inject(self, injected: InjectedMessage) -> None:
        """pi's custom message: after the run's prompt (still in the outbox), before the
        model call that writes them both, so the model reads it as the user's."""
        message = CustomMessage(
            custom_type=injected.custom_type,
            content=injected.content,
            display=injected.display,
            details=injected.details,
            timestamp=now_ms(),
        ).to_json_dict()
        entry = {"type": "custom_message", "customType": injected.custom_type, "content": message["content"]}
        self.entries.record({**entry, "display": injected.display, **_present("details", injected.details)})
        self.log.emit({"type": "message_start", "message": message})
        self.log.emit({"type": "message_end", "message": message})
        self.state.message_count += 1

    def apply(self, effects: ExtensionEffects | None) -> None:
        """Record the custom entries extension code appended and queue the messages it sent."""
        if effects is None:
            return
        for entry in effects.custom_entries:
            self.entries.record({"type": "custom", "customType": entry.custom_type, "data": entry.data})
        for sent in effects.messages:
            message = UserMessage(content=[TextContent(text=sent.text)], timestamp=now_ms())
            self.queues.add(message, "steering" if sent.deliver_as == "steer" else "follow_up")

    def report(self, problems: list[ExtensionProblem], event: str) -> None:
        for problem in problems:
            self.log.emit(
                {
                    "type": "extension_error",
                    "extensionPath": problem.extension,
                    "event": problem.event or event,
                    "error": problem.error,
                }
            )

    def active(self) -> list[str]:
        """The extensions whose hooks the tool activities run: those that loaded when the
        session started. One that loaded then and not later blocks the calls (fail closed)."""
        setup = self.state.extension_setup
        failed = {p.extension for p in setup.problems} if setup else set()
        return [p for p in self.config.extensions if p not in failed]

    def specs(self) -> list[ToolSpec]:
        setup = self.state.extension_setup
        return [t.spec() for t in setup.tools] if setup else []

    def find(self, name: str) -> ExtensionTool | None:
        setup = self.state.extension_setup
        return setup.find(name) if setup else None


class ExtensionToolRoute:
    def __init__(
        self,
        tools: ExtensionTools,
        control: RunControl,
        entries: EntryWriter,
        activities: Activities,
        sandbox: SandboxLease | None = None,
    ) -> None:
        self.tools = tools
        self.control = control
        self.entries = entries
        self.activities = activities
        self.sandbox = sandbox
        self.queue: str | None = None

    def handles(self, tool_name: str) -> bool:
        return self.tools.find(tool_name) is not None

    async def prepare(self) -> str | None:
        self.queue = None
        if (
            self.sandbox is None
            or self.sandbox.config.sandbox not in ("docker", "container")
            or not workflow.patched(EXTENSION_TOOLS_IN_SANDBOX)
        ):
            return None
        try:
            self.queue = await self.sandbox.queue()
        except ActivityError as err:
            return sandbox_unavailable(self.sandbox.unavailable(err), self.sandbox.user_container())
        return None

    async def run(self, call: ToolCall, slot: ToolSlot) -> RouteResult:
        tool = self.tools.find(call.name)
        assert tool is not None, "the route handles registered tools only"
        if self.control.abort_requested:
            return failed_result(call, ABORTED_TEXT)
        started_ms = now_ms()
        inp = ExtensionCallInput(
            file=self.entries.file(),
            tool=tool,
            tool_call=call,
            entry_id=slot.entry_id,
            parent_id=slot.parent_id,
            entry_timestamp=iso_timestamp(started_ms),
            timestamp_ms=started_ms,
            extensions=self.tools.active(),
        )
        return await run_tool_activity(
            call,
            self.control,
            self.activities,
            act.CALL_EXTENSION_TOOL,
            inp,
            extension_tool_options(tool.effect),
            effect=tool.effect,
            lost_text=LOST_EXTENSION_TEXT,
            failure="The extension tool failed",
            task_queue=self.queue,
        )
