"""One session entry as a block of the exported page: markdown rendered, thinking and
tool calls folded into `<details>`, tool results shown under the call that asked for them.

Works on the entries' JSON dicts (pi's shapes), so fields tempi does not model still show.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from html import escape
from typing import Any

from tempi.cli.export_markdown import render_markdown

_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_NOT_BASE64 = re.compile(r"[^A-Za-z0-9+/=]")


def local_time(ms: Any) -> str:
    if not isinstance(ms, int | float) or ms <= 0:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def blocks_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(
        str(b.get("text", "")) for b in content or [] if isinstance(b, dict) and b.get("type") == "text"
    )


def _images(content: Any) -> str:
    if not isinstance(content, list):
        return ""
    out = []
    for block in content:
        if not (isinstance(block, dict) and block.get("type") == "image"):
            continue
        mime = str(block.get("mimeType", "image/png"))
        # Only real image types with base64 payloads: anything else could carry markup.
        if mime in _IMAGE_TYPES:
            data = _NOT_BASE64.sub("", str(block.get("data", "")))
            out.append(f'<img alt="image" src="data:{mime};base64,{data}">')
    return "".join(out)


def _diff(diff: str) -> str:
    lines = []
    for line in diff.split("\n"):
        kind = "add" if line.startswith("+") else "del" if line.startswith("-") else "ctx"
        lines.append(f'<span class="{kind}">{escape(line) or "&nbsp;"}</span>')
    return f'<pre class="diff">{"".join(lines)}</pre>'


def tool_call_line(name: str, args: Any) -> str:
    """The call as one readable line: the command for bash, the path for file tools."""
    if name == "bash" and isinstance(args, dict) and isinstance(args.get("command"), str):
        return "$ " + args["command"]
    if isinstance(args, dict) and isinstance(args.get("path"), str):
        rest = {k: v for k, v in args.items() if k not in ("path", "content", "edits", "oldText", "newText")}
        return f"{name} {args['path']}" + (f" {json.dumps(rest, ensure_ascii=False)}" if rest else "")
    return f"{name} {json.dumps(args, ensure_ascii=False)}"


def _short(text: str, limit: int = 120) -> str:
    first = text.strip().split("\n", 1)[0]
    more = len(first) > limit or "\n" in text.strip()
    return (first[:limit] + " …") if more else first


def tool_html(call: dict[str, Any], result: dict[str, Any] | None) -> str:
    """A tool call, folded: the summary names the call, the body holds arguments and output."""
    name = str(call.get("name", "?"))
    args = call.get("arguments")
    line = tool_call_line(name, args)
    is_error = bool(result and result.get("isError"))
    body = []
    if len(line) > 120 or "\n" in line:
        body.append(f'<pre class="args">{escape(line)}</pre>')
    if isinstance(args, dict):
        if name == "write" and isinstance(args.get("content"), str):
            body.append(f'<div class="label">content written</div><pre>{escape(args["content"])}</pre>')
        if (
            name == "edit"
            and isinstance(args.get("edits"), list)
            and not (result and isinstance(result.get("details"), dict) and "diff" in result["details"])
        ):
            body.append(f"<pre>{escape(json.dumps(args['edits'], ensure_ascii=False, indent=1))}</pre>")
    if result is None:
        status, label = "pending", "no result recorded"
    else:
        details = result.get("details")
        if isinstance(details, dict) and isinstance(details.get("diff"), str):
            body.append(_diff(details["diff"]))
        text = blocks_text(result.get("content"))
        lines = len(text.splitlines())  # `seq 1 30` printed 30 lines, its last ending in a newline
        status = "error" if is_error else "ok"
        label = "error" if is_error else f"{lines} line{'s' if lines != 1 else ''} of output"
        body.append(f'<pre class="output">{escape(text)}</pre>{_images(result.get("content"))}')
    shown = line[len(name) + 1 :] if line.startswith(name + " ") else line
    return (
        f'<details class="tool {status}"><summary><span class="tool-name">{escape(name)}</span> '
        f'<code class="call">{escape(_short(shown))}</code> <span class="tool-status">{escape(label)}</span>'
        f"</summary>{''.join(body)}</details>"
    )


def _thinking(text: str) -> str:
    return (
        f'<details class="thinking"><summary>Thinking <span class="dim">({len(text.split())} words)</span>'
        f'</summary><div class="md">{render_markdown(text)}</div></details>'
    )


def message_html(message: dict[str, Any], results: dict[str, dict[str, Any]]) -> tuple[str, str]:
    """(css class, inner HTML) of a conversation message; empty HTML for what is not shown."""
    role = message.get("role")
    content = message.get("content")
    if role == "user":
        return "user", f'<div class="md">{render_markdown(blocks_text(content))}</div>{_images(content)}'
    if role == "assistant":
        parts = []
        for block in content or []:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text" and block.get("text"):
                parts.append(f'<div class="md">{render_markdown(str(block["text"]))}</div>')
            elif kind == "thinking" and block.get("thinking"):
                parts.append(_thinking(str(block["thinking"])))
            elif kind == "thinking" and block.get("redacted"):
                parts.append('<div class="note">thinking redacted by the provider</div>')
            elif kind == "toolCall":
                parts.append(tool_html(block, results.get(str(block.get("id")))))
        if message.get("stopReason") in ("error", "aborted"):
            parts.append(
                f'<div class="error-text">{escape(str(message.get("stopReason")))}: '
                f"{escape(str(message.get('errorMessage') or ''))}</div>"
            )
        return "assistant", "".join(parts)
    if role == "bashExecution":
        call = {"name": "bash", "arguments": {"command": message.get("command", "")}}
        result = {
            "content": [{"type": "text", "text": message.get("output", "")}],
            "isError": message.get("exitCode") not in (0, None),
        }
        return "user bash", tool_html(call, result)
    if role in ("compactionSummary", "branchSummary"):
        title = (
            "Earlier conversation, summarized" if role == "compactionSummary" else "Summary of another branch"
        )
        return "summary", (
            f'<details class="summary"><summary>{title}</summary>'
            f'<div class="md">{render_markdown(str(message.get("summary", "")))}</div></details>'
        )
    if role == "custom" and message.get("display", True):
        return (
            "user custom",
            f'<div class="md">{render_markdown(blocks_text(content))}</div>{_images(content)}',
        )
    return "", ""


_MARKUP = re.compile(r"\*+|__|`+|^#{1,6}\s+|~~", re.M)


def _plain(text: str, limit: int = 90) -> str:
    # The sidebar has one line per entry: markdown's markers would only be noise there.
    return _short(" ".join(_MARKUP.sub("", text).split()), limit)


def preview(message: dict[str, Any]) -> str:
    """A one-line description of a message for the tree sidebar."""
    role = message.get("role")
    content = message.get("content")
    if role == "assistant":
        text = " ".join(
            str(b.get("text", "")) for b in content or [] if isinstance(b, dict) and b.get("type") == "text"
        ).strip()
        calls = [
            tool_call_line(str(b.get("name", "?")), b.get("arguments"))
            for b in content or []
            if isinstance(b, dict) and b.get("type") == "toolCall"
        ]
        if not text and calls:
            text = "→ " + "; ".join(_short(c, 60) for c in calls)
        if not text and message.get("stopReason") in ("error", "aborted"):
            text = f"[{message.get('stopReason')}]"
        return _plain(text) if not text.startswith("→") else _short(text, 90)
    if role == "bashExecution":
        return _short("$ " + str(message.get("command", "")), 90)
    if role in ("compactionSummary", "branchSummary"):
        return _plain(str(message.get("summary", "")))
    return _plain(blocks_text(content))
