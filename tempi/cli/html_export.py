"""A session as one self-contained web page: the conversation of its current branch,
tool calls with their arguments, coloured diffs and collapsible tool output."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

from tempi.agent.session_entries import CompactionEntry, MessageEntry, ModelChangeEntry, SessionEntry
from tempi.agent.session_tree import entry_message
from tempi.store.loading import LoadedSession
from tempi.store.session_store import SessionStore

STYLE = """
body{font:15px/1.5 system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 1em;color:#1d1d1f;background:#fafafa}
header{border-bottom:1px solid #ddd;margin-bottom:1.5em}
header h1{margin:0 0 .2em;font-size:1.4em}
.meta{color:#666;font-size:.85em}
.msg{margin:1em 0;padding:.8em 1em;border-radius:8px;background:#fff;border:1px solid #e3e3e3}
.user{border-left:4px solid #2f6fde}
.assistant{border-left:4px solid #2da44e}
.note{color:#666;font-size:.85em;margin:.6em 0}
.role{font-size:.75em;text-transform:uppercase;letter-spacing:.05em;color:#888;margin-bottom:.3em}
.text{white-space:pre-wrap;word-wrap:break-word}
.thinking{white-space:pre-wrap;color:#777;font-style:italic;border-left:2px solid #ddd;padding-left:.6em}
.tool{margin:.6em 0;border:1px solid #e3e3e3;border-radius:6px;background:#f6f8fa}
.tool .call{font-family:ui-monospace,monospace;font-size:.85em;padding:.4em .6em;white-space:pre-wrap;word-break:break-all}
.tool details{border-top:1px solid #e3e3e3;padding:.3em .6em}
.tool summary{cursor:pointer;font-size:.8em;color:#555}
.tool.error{border-color:#e5a0a0;background:#fff5f5}
pre{font-family:ui-monospace,monospace;font-size:.82em;white-space:pre-wrap;word-break:break-all;margin:.3em 0}
.diff .add{background:#e6ffec;color:#116329;display:block}
.diff .del{background:#ffebe9;color:#82071e;display:block}
.diff .ctx{display:block;color:#555}
.error-text{color:#b42318}
img{max-width:100%}
"""


def default_export_path(session_file: Path) -> Path:
    return Path(f"tempi-session-{session_file.stem}.html")


def _time(ms: Any) -> str:
    if not isinstance(ms, int | float) or ms <= 0:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _blocks_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(
        b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"
    )


def _images(content: Any) -> str:
    if not isinstance(content, list):
        return ""
    return "".join(
        f'<img alt="image" src="data:{escape(b.get("mimeType", "image/png"))};base64,{escape(b.get("data", ""))}">'
        for b in content
        if isinstance(b, dict) and b.get("type") == "image"
    )


def _diff(diff: str) -> str:
    lines = []
    for line in diff.split("\n"):
        kind = "add" if line.startswith("+") else "del" if line.startswith("-") else "ctx"
        lines.append(f'<span class="{kind}">{escape(line) or "&nbsp;"}</span>')
    return f'<pre class="diff">{"".join(lines)}</pre>'


def _tool_args(name: str, args: Any) -> str:
    if name == "bash" and isinstance(args, dict) and isinstance(args.get("command"), str):
        return "$ " + args["command"]
    if (
        isinstance(args, dict)
        and isinstance(args.get("path"), str)
        and name in ("read", "write", "edit", "ls")
    ):
        rest = {k: v for k, v in args.items() if k not in ("path", "content", "edits")}
        return f"{name} {args['path']}" + (f" {json.dumps(rest, ensure_ascii=False)}" if rest else "")
    return f"{name} {json.dumps(args, ensure_ascii=False, indent=1)}"


def _tool_html(call: dict[str, Any], result: dict[str, Any] | None) -> str:
    name = str(call.get("name", "?"))
    args = call.get("arguments")
    parts = [f'<div class="call">{escape(_tool_args(name, args))}</div>']
    if name == "write" and isinstance(args, dict) and isinstance(args.get("content"), str):
        parts.append(
            f"<details><summary>content written</summary><pre>{escape(args['content'])}</pre></details>"
        )
    is_error = bool(result and result.get("isError"))
    if result is not None:
        details = result.get("details")
        if isinstance(details, dict) and isinstance(details.get("diff"), str):
            parts.append(f"<details open><summary>diff</summary>{_diff(details['diff'])}</details>")
        text = _blocks_text(result.get("content"))
        lines = text.count("\n") + 1 if text else 0
        label = "error" if is_error else f"output ({lines} line{'s' if lines != 1 else ''})"
        opened = " open" if is_error or lines <= 5 else ""
        parts.append(
            f"<details{opened}><summary>{label}</summary><pre>{escape(text)}</pre>{_images(result.get('content'))}</details>"
        )
    else:
        parts.append('<div class="note">no result recorded</div>')
    return f'<div class="tool{" error" if is_error else ""}">{"".join(parts)}</div>'


def _message_html(message: dict[str, Any], results: dict[str, dict[str, Any]]) -> str:
    role = message.get("role")
    when = escape(_time(message.get("timestamp")))
    if role == "user":
        body = f'<div class="text">{escape(_blocks_text(message.get("content")))}</div>{_images(message.get("content"))}'
        return f'<div class="msg user"><div class="role">user · {when}</div>{body}</div>'
    if role == "assistant":
        parts = []
        for block in message.get("content") or []:
            kind = block.get("type")
            if kind == "text" and block.get("text"):
                parts.append(f'<div class="text">{escape(block["text"])}</div>')
            elif kind == "thinking" and block.get("thinking"):
                parts.append(f'<div class="thinking">{escape(block["thinking"])}</div>')
            elif kind == "toolCall":
                parts.append(_tool_html(block, results.get(str(block.get("id")))))
        if message.get("stopReason") in ("error", "aborted"):
            parts.append(
                f'<div class="error-text">[{escape(str(message.get("stopReason")))}] '
                f"{escape(str(message.get('errorMessage') or ''))}</div>"
            )
        model = escape(f"{message.get('provider', '')}/{message.get('model', '')}")
        return f'<div class="msg assistant"><div class="role">assistant · {model} · {when}</div>{"".join(parts)}</div>'
    if role == "bashExecution":
        call = {"name": "bash", "arguments": {"command": message.get("command", "")}}
        result = {
            "content": [{"type": "text", "text": message.get("output", "")}],
            "isError": message.get("exitCode") not in (0, None),
        }
        return (
            f'<div class="msg user"><div class="role">user ran · {when}</div>{_tool_html(call, result)}</div>'
        )
    if role in ("compactionSummary", "branchSummary"):
        title = (
            "earlier conversation, summarized" if role == "compactionSummary" else "summary of another branch"
        )
        return (
            f'<div class="msg"><details><summary>{title}</summary>'
            f'<div class="text">{escape(str(message.get("summary", "")))}</div></details></div>'
        )
    if role == "custom" and message.get("display", True):
        return (
            f'<div class="msg user"><div class="role">{escape(str(message.get("customType", "custom")))}</div>'
            f'<div class="text">{escape(_blocks_text(message.get("content")))}</div></div>'
        )
    return ""


def _branch(loaded: LoadedSession) -> list[SessionEntry]:
    leaf = loaded.tree.leaf_id
    return loaded.tree.path_to(leaf) if leaf else []


def render_session_html(loaded: LoadedSession) -> str:
    entries = _branch(loaded)
    results: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if isinstance(entry, MessageEntry) and entry.message.role == "toolResult":
            data = entry.message.to_json_dict()
            results[str(data.get("toolCallId"))] = data
    body: list[str] = []
    for entry in entries:
        if isinstance(entry, ModelChangeEntry):
            body.append(f'<div class="note">model: {escape(entry.provider)}/{escape(entry.model_id)}</div>')
        elif isinstance(entry, CompactionEntry):
            body.append(
                f'<div class="msg"><details><summary>earlier conversation compacted '
                f'({entry.tokens_before} tokens)</summary><div class="text">{escape(entry.summary)}</div></details></div>'
            )
        else:
            message = entry_message(entry)
            if message is not None and message.role != "toolResult":
                body.append(_message_html(message.to_json_dict(), results))
    header = loaded.header
    title = loaded.tree.session_name() or f"Session {header.id[:8]}"
    meta = f"{escape(header.id)} · {escape(header.cwd)} · started {escape(header.timestamp)}"
    if header.parent_session:
        meta += f" · forked from {escape(header.parent_session)}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width,initial-scale=1"><title>{escape(title)}</title>'
        f'<style>{STYLE}</style></head><body><header><h1>{escape(title)}</h1><div class="meta">{meta}</div></header>'
        f"{''.join(body)}</body></html>\n"
    )


def export_session_html(store: SessionStore, source: Path, target: Path) -> Path:
    html = render_session_html(store.load(source))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(html, encoding="utf-8")
    return target
