"""What the conversation looks like in the terminal: pi's events and stored messages turned
into rich renderables, plus the state of the part that is still changing (the live area)."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.markdown import Markdown
from rich.text import Text

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
# pi's previews: a command shows its last lines (its end matters), a file or a listing its
# first; tools pi does not preview show their first COLLAPSED_LINES.
COLLAPSED_LINES = 8
TOOL_PREVIEW_LINES = {"bash": 5, "read": 10, "grep": 15, "find": 20, "ls": 20}
USER_BASH_PREVIEW_LINES = 20
HIDDEN_THINKING_LABEL = "Thinking..."
LIVE_TOOL_LINES = 3
# A tool slower than this shows its elapsed time.
SLOW_TOOL_S = 1.0


def to_ansi(renderable: RenderableType, width: int) -> str:
    """The renderable as terminal text with colour codes, wrapped to `width`."""
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        force_terminal=True,
        color_system="256",
        width=max(20, width),
        legacy_windows=False,
        emoji=False,
        highlight=False,
    )
    console.print(renderable)
    return buffer.getvalue()


def content_text(content: Any, kind: str = "text") -> str:
    """The text (or thinking) of a message's content, whether a string or a list of blocks."""
    if isinstance(content, str):
        return content if kind == "text" else ""
    if not isinstance(content, list):
        return ""
    return "".join(str(b.get(kind) or "") for b in content if isinstance(b, dict) and b.get("type") == kind)


@dataclass
class Display:
    """How the transcript is drawn; Ctrl+O and Ctrl+T flip these and redraw it."""

    expanded: bool = False
    hide_thinking: bool = False


def spinner_frame(now: float) -> str:
    return SPINNER[int(now * 10) % len(SPINNER)]


# --- pieces ---------------------------------------------------------------------------


def user_block(text: str) -> RenderableType:
    out = Text("\n")  # a blank line sets each exchange apart
    out.append("❯ ", style="bold cyan")
    out.append(text, style="bold")
    return out


def notice(text: str, style: str = "dim") -> RenderableType:
    return Text(text, style=style)


def _markdown(text: str) -> RenderableType:
    return Markdown(text, code_theme="monokai", hyperlinks=False)


def assistant_block(
    message: dict[str, Any], *, final: bool, hide_thinking: bool = False
) -> RenderableType | None:
    parts: list[RenderableType] = []
    thinking = content_text(message.get("content"), "thinking").strip()
    if thinking:
        parts.append(Text(HIDDEN_THINKING_LABEL if hide_thinking else thinking, style="dim italic"))
    text = content_text(message.get("content")).strip()
    if text:
        parts.append(_markdown(text))
    if final:
        reason = message.get("stopReason")
        if reason == "aborted":
            parts.append(Text("Aborted.", style="bold red"))
        elif reason == "error":
            parts.append(
                Text(f"Error: {message.get('errorMessage') or 'the request failed'}", style="bold red")
            )
    else:
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "toolCall":
                parts.append(
                    Text(f"→ {tool_title(block.get('name', ''), block.get('arguments') or {})}", style="dim")
                )
    return Group(*parts) if parts else None


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.replace("\n", " ⏎ ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_title(name: str, args: dict[str, Any]) -> str:
    """One line saying what a tool call does, in the terms a user thinks of it."""
    if not isinstance(args, dict):
        return name
    if name == "bash":
        return f"$ {_short(args.get('command', ''), 120)}"
    path = args.get("path") or args.get("file_path") or ""
    if name == "read":
        extra = ""
        if args.get("offset") or args.get("limit"):
            extra = f" (lines {args.get('offset') or 1}+{args.get('limit') or ''})"
        return f"read {path}{extra}"
    if name == "write":
        lines = str(args.get("content") or "").count("\n") + 1
        return f"write {path} ({lines} lines)"
    if name == "edit":
        return f"edit {path}"
    if name == "grep":
        return f"grep {_short(args.get('pattern', ''), 60)} in {path or '.'}"
    if name == "find":
        return f"find {_short(args.get('pattern', ''), 60)} in {path or '.'}"
    if name == "ls":
        return f"ls {path or '.'}"
    return f"{name} {_short(args, 100)}"


def _diff(diff: str) -> RenderableType:
    out = Text()
    for line in diff.splitlines():
        style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
        out.append(line + "\n", style=style)
    out.rstrip()
    return out


@dataclass
class ToolOutcome:
    block: RenderableType
    # The whole output when the block shows only part of it.
    full_output: str | None = None


def tool_block(
    name: str,
    args: dict[str, Any],
    result: dict[str, Any] | None,
    is_error: bool,
    elapsed: float | None,
    *,
    expanded: bool = False,
) -> ToolOutcome:
    header = Text()
    header.append("✗ " if is_error else "✓ ", style="bold red" if is_error else "bold green")
    header.append(tool_title(name, args), style="bold")
    if elapsed is not None and elapsed >= SLOW_TOOL_S:
        header.append(f"  {elapsed:.1f}s", style="dim")
    result = result or {}
    details = result.get("details") or {}
    if name == "edit" and not is_error and isinstance(details, dict) and details.get("diff"):
        return ToolOutcome(Group(header, _diff(str(details["diff"]))))
    output = content_text(result.get("content")).rstrip("\n")
    if not output:
        return ToolOutcome(header)
    style = "red" if is_error else "dim"
    return _with_preview(header, output, style, TOOL_PREVIEW_LINES.get(name, COLLAPSED_LINES),
                         from_end=name == "bash", expanded=expanded)  # fmt: skip


def _with_preview(
    header: Text,
    output: str,
    style: str,
    limit: int,
    *,
    from_end: bool,
    expanded: bool,
    user_bash: bool = False,
) -> ToolOutcome:
    """The header and the output, cut to `limit` lines as pi's previews are unless expanded,
    with pi's words for what is hidden."""
    lines = output.splitlines()
    if len(lines) <= limit:
        return ToolOutcome(Group(header, Text(output, style=style)))
    if expanded:
        hint = Text("(ctrl+o to collapse)", style="dim italic")
        return ToolOutcome(Group(header, Text(output, style=style), hint), full_output=output)
    hidden = len(lines) - limit
    shown = lines[-limit:] if from_end else lines[:limit]
    body = Text("\n".join(shown), style=style)
    if user_bash:
        more = Text(f"... {hidden} more lines (ctrl+o to expand)", style="dim italic")
        return ToolOutcome(Group(header, body, more), full_output=output)
    if from_end:
        more = Text(f"... ({hidden} earlier lines, ctrl+o to expand)", style="dim italic")
        return ToolOutcome(Group(header, more, body), full_output=output)
    more = Text(f"... ({hidden} more lines, ctrl+o to expand)", style="dim italic")
    return ToolOutcome(Group(header, body, more), full_output=output)


def bash_block(
    command: str, output: str, exit_code: int | None, cancelled: bool, *, expanded: bool = False
) -> ToolOutcome:
    """A command the user ran with `!`: pi shows its last 20 lines, the rest on Ctrl+O."""
    failed = cancelled or (exit_code not in (0, None))
    header = Text()
    header.append("✗ " if failed else "✓ ", style="bold red" if failed else "bold green")
    header.append(tool_title("bash", {"command": command}), style="bold")
    text = output.rstrip("\n") + (f"\n(exit code {exit_code})" if failed and exit_code else "")
    if not text.strip():
        return ToolOutcome(header)
    return _with_preview(header, text, "red" if failed else "dim", USER_BASH_PREVIEW_LINES,
                         from_end=True, expanded=expanded, user_bash=True)  # fmt: skip


# --- the live area ----------------------------------------------------------------------


@dataclass
class RunningTool:
    name: str
    args: dict[str, Any]
    started: float
    output: str = ""


@dataclass
class LiveView:
    """What is still changing. `apply` takes an event and returns the blocks that are done,
    for the scrollback; `live` draws the rest."""

    assistant: dict[str, Any] | None = None
    tools: dict[str, RunningTool] = field(default_factory=dict)
    steering: list[str] = field(default_factory=list)
    follow_up: list[str] = field(default_factory=list)
    streaming: bool = False
    compacting: bool = False
    last_full_output: str | None = None
    display: Display = field(default_factory=Display)

    def apply(self, event: dict[str, Any], now: float) -> list[RenderableType]:
        kind = event.get("type")
        message = event.get("message") or {}
        role = message.get("role")
        if kind == "agent_start":
            self.streaming = True
        elif kind == "agent_end":
            self.streaming = False
            self.assistant = None
            self.tools.clear()
        elif kind in ("message_start", "message_update") and role == "assistant":
            self.assistant = message
        elif kind == "message_end" and role == "assistant":
            self.assistant = None
            block = assistant_block(message, final=True, hide_thinking=self.display.hide_thinking)
            return [block] if block is not None else []
        elif kind == "message_end" and role == "user":
            return [user_block(content_text(message.get("content")))]
        elif kind == "tool_execution_start":
            self.tools[event["toolCallId"]] = RunningTool(
                event.get("toolName", ""), event.get("args") or {}, now
            )
        elif kind == "tool_execution_update":
            tool = self.tools.get(event.get("toolCallId", ""))
            if tool is not None:
                tool.output = content_text((event.get("partialResult") or {}).get("content"))
        elif kind == "tool_execution_end":
            running = self.tools.pop(event.get("toolCallId", ""), None)
            outcome = tool_block(
                event.get("toolName", ""),
                event.get("args") or (running.args if running else {}),
                event.get("result"),
                bool(event.get("isError")),
                now - running.started if running else None,
                expanded=self.display.expanded,
            )
            if outcome.full_output is not None:
                self.last_full_output = outcome.full_output
            return [outcome.block]
        elif kind == "queue_update":
            self.steering = list(event.get("steering") or [])
            self.follow_up = list(event.get("followUp") or [])
        elif kind == "compaction_start":
            self.compacting = True
        elif kind == "compaction_end":
            self.compacting = False
            return [compaction_block(event)]
        elif kind == "auto_retry_start":
            return [
                notice(
                    f"The provider failed ({event.get('errorMessage', 'error')}); retry "
                    f"{event.get('attempt')}/{event.get('maxAttempts')} in {int(event.get('delayMs', 0)) / 1000:.0f}s",
                    "yellow",
                )
            ]
        elif kind == "session_info_changed" and event.get("name"):
            return [notice(f"Session name: {event['name']}")]
        return []

    def live(self, now: float) -> RenderableType | None:
        parts: list[RenderableType] = []
        if self.assistant is not None:
            block = assistant_block(self.assistant, final=False, hide_thinking=self.display.hide_thinking)
            if block is not None:
                parts.append(block)
        for tool in self.tools.values():
            line = Text()
            line.append(f"{spinner_frame(now)} ", style="cyan")
            line.append(tool_title(tool.name, tool.args), style="bold")
            elapsed = now - tool.started
            if elapsed >= SLOW_TOOL_S:
                line.append(f"  {elapsed:.0f}s", style="dim")
            parts.append(line)
            tail = tool.output.rstrip("\n").splitlines()[-LIVE_TOOL_LINES:]
            if tail:
                parts.append(Text("\n".join(tail), style="dim"))
        if self.compacting:
            parts.append(Text(f"{spinner_frame(now)} Compacting the conversation…", style="cyan"))
        elif self.streaming and self.assistant is None and not self.tools:
            parts.append(Text(f"{spinner_frame(now)} Working…", style="cyan"))
        return Group(*parts) if parts else None


def compaction_block(event: dict[str, Any]) -> RenderableType:
    if event.get("aborted"):
        return notice("Compaction cancelled.", "yellow")
    if event.get("errorMessage"):
        return notice(f"Compaction failed: {event['errorMessage']}", "red")
    result = event.get("result") or {}
    before = result.get("tokensBefore")
    tokens = f" ({before:,} tokens before)" if isinstance(before, int) else ""
    return notice(f"Compacted the conversation{tokens}; a summary replaces the older messages.", "green")


# --- history read back from the session file ------------------------------------------------


def history_blocks(messages: list[dict[str, Any]], display: Display | None = None) -> list[RenderableType]:
    """A session's messages as they looked live (without timings)."""
    display = display or Display()
    results = {
        m.get("toolCallId"): m for m in messages if m.get("role") == "toolResult" and m.get("toolCallId")
    }
    blocks: list[RenderableType] = []
    for m in messages:
        role = m.get("role")
        if role == "user":
            blocks.append(user_block(content_text(m.get("content"))))
        elif role == "assistant":
            block = assistant_block(m, final=True, hide_thinking=display.hide_thinking)
            if block is not None:
                blocks.append(block)
            for call in m.get("content") or []:
                if isinstance(call, dict) and call.get("type") == "toolCall":
                    result = results.get(call.get("id"))
                    blocks.append(
                        tool_block(
                            call.get("name", ""),
                            call.get("arguments") or {},
                            result,
                            bool(result and result.get("isError")),
                            None,
                            expanded=display.expanded,
                        ).block
                    )
        elif role == "bashExecution":
            blocks.append(
                bash_block(
                    str(m.get("command", "")),
                    str(m.get("output", "")),
                    m.get("exitCode"),
                    bool(m.get("cancelled")),
                    expanded=display.expanded,
                ).block
            )
        elif role == "compactionSummary":
            blocks.append(notice(f"[earlier conversation compacted ({m.get('tokensBefore', 0):,} tokens)]"))
        elif role == "branchSummary":
            blocks.append(notice("[summary of another branch]"))
    return blocks
