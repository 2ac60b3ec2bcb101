"""MCP tools in a session: listed once by an activity when the session starts (kept in the
carried state, so a continued run does not list again), offered to the model beside the
builtin tools, and called on their own route, each call an activity on a worker. A tool's
retries follow its MCP annotations: read-only or idempotent ones retry after a lost worker,
the rest run at most once."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from tempi.agent.llm_context import ToolSpec
    from tempi.agent.mcp_tools import MCP_PREFIX, McpServerProblem, McpTool, McpToolList
    from tempi.agent.messages import ToolCall
    from tempi.agent.session_entries import iso_timestamp
    from tempi.workflows import activity_names as act
    from tempi.workflows.activity_payloads import McpCallInput, McpListInput
    from tempi.workflows.session.activity_errors import cause
    from tempi.workflows.session.activity_options import Activities, mcp_tool_options
    from tempi.workflows.session.activity_tool import failed_result, run_tool_activity
    from tempi.workflows.session.entries import EntryWriter, now_ms
    from tempi.workflows.session.extension_route import ExtensionTools
    from tempi.workflows.session.run_control import RunControl
    from tempi.workflows.session.texts import ABORTED_TEXT
    from tempi.workflows.session.tool_routes import RouteResult, ToolSlot
    from tempi.workflows.session_types import CarriedState, SessionConfig

LOST_MCP_TEXT = (
    "The worker running this MCP tool stopped before it reported back, and the server does not "
    "mark the tool read-only or idempotent, so it was not run again; it may or may not have run."
)


class McpTools:
    def __init__(self, config: SessionConfig, state: CarriedState, activities: Activities) -> None:
        self.config = config
        self.state = state
        self.activities = activities

    async def ensure_listed(self) -> None:
        if not self.config.mcp or self.state.mcp_tools is not None:
            return
        try:
            listed: McpToolList = await self.activities.execute(
                act.LIST_MCP_TOOLS, McpListInput(cwd=self.config.cwd, sandbox=self.config.sandbox), McpToolList
            )
        except ActivityError as err:
            listed = McpToolList(problems=[McpServerProblem(server="", error=cause(err))])
        self.state.mcp_tools = listed

    def specs(self) -> list[ToolSpec]:
        return [t.spec() for t in self.state.mcp_tools.tools] if self.state.mcp_tools else []

    def find(self, name: str) -> McpTool | None:
        if not name.startswith(MCP_PREFIX) or self.state.mcp_tools is None:
            return None
        return self.state.mcp_tools.find(name)


class McpToolRoute:
    def __init__(
        self,
        tools: McpTools,
        control: RunControl,
        entries: EntryWriter,
        activities: Activities,
        extensions: ExtensionTools | None = None,
    ) -> None:
        self.extensions = extensions
        self.tools = tools
        self.control = control
        self.entries = entries
        self.activities = activities

    def handles(self, tool_name: str) -> bool:
        return self.tools.find(tool_name) is not None

    async def prepare(self) -> str | None:
        return None

    async def run(self, call: ToolCall, slot: ToolSlot) -> RouteResult:
        tool = self.tools.find(call.name)
        assert tool is not None, "the route handles listed tools only"
        if self.control.abort_requested:
            return failed_result(call, ABORTED_TEXT)
        started_ms = now_ms()
        inp = McpCallInput(
            file=self.entries.file(),
            tool=tool,
            tool_call=call,
            entry_id=slot.entry_id,
            parent_id=slot.parent_id,
            entry_timestamp=iso_timestamp(started_ms),
            timestamp_ms=started_ms,
            extensions=self.extensions.active() if self.extensions is not None else [],
        )
        return await run_tool_activity(
            call,
            self.control,
            self.activities,
            act.CALL_MCP_TOOL,
            inp,
            mcp_tool_options(tool.effect),
            effect=tool.effect,
            lost_text=LOST_MCP_TEXT,
            failure="The MCP tool failed",
        )
