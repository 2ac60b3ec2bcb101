"""A session as one self-contained web page: every branch of its tree in a sidebar, the
conversation from the root to the chosen entry with rendered markdown, thinking and tool
calls folded, token/cost/duration counts, and a search box. No network: the style and the
script (export_assets/) are inlined, and markdown is rendered here at export time.

The page opens on the session's current branch; `#entry=ID` shows the branch through ID
(up to its newest leaf) and `&q=TEXT` searches, so links (and headless browsers) can open
any view. A live session's export also shows its system prompt and tools, and every
export carries the session file for pi's "↓ JSONL" download.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tempi.agent.llm_context import ToolSpec
from tempi.agent.session_entries import (
    CompactionEntry,
    ModelChangeEntry,
    SessionEntry,
    epoch_ms,
)
from tempi.agent.session_tree import entry_message
from tempi.agent.tool_specs import TOOL_DEFINITIONS, tool_specs
from tempi.cli.export_entries import local_time, message_html, preview
from tempi.cli.export_markdown import render_markdown
from tempi.cli.export_stats import Stats, message_usage, stats_table
from tempi.client import SessionClient, SessionNotFound
from tempi.store.loading import LoadedSession
from tempi.store.session_store import SessionStore

WHO = {
    "user": "You",
    "assistant": "Assistant",
    "bashExecution": "You ran",
    "compactionSummary": "Summary",
    "branchSummary": "Branch summary",
    "custom": "Extension",
}


@dataclass
class _Shown:
    """An entry that has a block on the page; `in_tree` when the sidebar lists it too."""

    entry: SessionEntry
    css: str
    who: str
    inner: str
    preview: str
    meta: str
    data: dict[str, str]
    in_tree: bool = True


def default_export_path(session_file: Path) -> Path:
    return Path(f"tempi-session-{session_file.stem}.html")


def _asset(name: str) -> str:
    return resources.files("tempi.cli").joinpath("export_assets", name).read_text(encoding="utf-8")


def _ms(entry: SessionEntry) -> int:
    try:
        return epoch_ms(entry.timestamp) if entry.timestamp else 0
    except ValueError:
        return 0


def _shown(entry: SessionEntry, results: dict[str, dict[str, Any]]) -> _Shown | None:
    when = local_time(_ms(entry))
    if isinstance(entry, ModelChangeEntry):
        text = f"model: {entry.provider}/{entry.model_id}"
        return _Shown(entry, "note", "", escape(text), text, when, {}, in_tree=False)
    if isinstance(entry, CompactionEntry):
        inner = (
            f'<details class="summary"><summary>Earlier conversation compacted '
            f"({entry.tokens_before:,} tokens before)</summary>"
            f'<div class="md">{render_markdown(entry.summary)}</div></details>'
        )
        return _Shown(
            entry,
            "summary",
            "Compaction",
            inner,
            preview({"role": "compactionSummary", "summary": entry.summary}),
            when,
            {},
        )
    message = entry_message(entry)
    if message is None or message.role == "toolResult":
        return None
    data = message.to_json_dict()
    css, inner = message_html(data, results)
    if not inner:
        return None
    attrs: dict[str, str] = {"role": str(data.get("role"))}
    meta = when
    if data.get("role") == "assistant":
        attrs.update(message_usage(data).as_data())
        attrs["tools"] = str(sum(1 for b in data.get("content") or [] if b.get("type") == "toolCall"))
        meta = f"{when} · {data.get('provider', '')}/{data.get('model', '')}"
    who = WHO.get(str(data.get("role")), str(data.get("role")))
    if data.get("role") == "custom":
        who = str(data.get("customType") or who)
    return _Shown(entry, css, who, inner, preview(data), meta, attrs)


def _newest_leaves(entries: list[SessionEntry]) -> dict[str, str]:
    """For each entry, the newest entry below it (itself when it has none): the branch a
    click on it shows. Children are written after their parents, so one backward pass
    settles each entry before its parent is reached."""
    index = {entry.id: i for i, entry in enumerate(entries)}
    newest: dict[str, str] = {}
    for entry in reversed(entries):
        best = newest.setdefault(entry.id, entry.id)
        parent = entry.parent_id
        if parent in index and (parent not in newest or index[best] > index[newest[parent]]):
            newest[parent] = best
    return newest


def _tree_html(shown: dict[str, _Shown], entries: list[SessionEntry], labels: dict[str, str]) -> str:
    """The sidebar: listed entries in tree order, with connectors where branches split.
    Entries the sidebar leaves out (tool results, settings) pass their children up to the
    nearest listed ancestor."""
    by_id = {entry.id: entry for entry in entries}
    listed = {key for key, item in shown.items() if item.in_tree}
    newest = _newest_leaves(entries)

    def listed_parent(entry: SessionEntry) -> str | None:
        seen: set[str] = set()
        parent = entry.parent_id
        while parent is not None and parent not in listed and parent in by_id and parent not in seen:
            seen.add(parent)
            parent = by_id[parent].parent_id
        return parent if parent in listed else None

    kids: dict[str | None, list[str]] = {}
    for entry in entries:
        if entry.id in listed:
            kids.setdefault(listed_parent(entry), []).append(entry.id)

    rows: list[str] = []
    # Iterative walk: a long session is a deep chain, too deep for recursion.
    stack: list[tuple[str, str, str]] = []

    def push_children(parent: str | None, cont: str) -> None:
        children = kids.get(parent, [])
        if len(children) == 1:
            stack.append((children[0], cont, cont))
            return
        for i in reversed(range(len(children))):
            last = i == len(children) - 1
            stack.append((children[i], cont + ("└─ " if last else "├─ "), cont + ("   " if last else "│  ")))

    push_children(None, "")
    drawn: set[str] = set()  # entries sharing an id can make a child its own ancestor
    while stack:
        entry_id, line_prefix, cont = stack.pop()
        if entry_id in drawn:
            continue
        drawn.add(entry_id)
        item = shown[entry_id]
        label = labels.get(entry_id)
        tag = f' <span class="tag">{escape(label)}</span>' if label else ""
        rows.append(
            f'<a class="node {item.css}" href="#entry={escape(quote(entry_id))}" data-id="{escape(entry_id)}" '
            f'data-leaf="{escape(newest.get(entry_id, entry_id))}"><span class="gutter">{line_prefix}</span>'
            f'<span class="who">{escape(item.who)}</span>{tag} <span class="text">{escape(item.preview)}</span></a>'
        )
        push_children(entry_id, cont)
    return "".join(rows)


def _article(item: _Shown, on_path: bool) -> str:
    entry_id = escape(item.entry.id)
    href = escape(quote(item.entry.id))
    data = "".join(f' data-{key}="{escape(value)}"' for key, value in item.data.items())
    off = "" if on_path else " off"
    if item.css == "note":
        return f'<article class="msg note{off}" id="m-{entry_id}" data-id="{entry_id}">{item.inner}</article>'
    return (
        f'<article class="msg {item.css}{off}" id="m-{entry_id}" data-id="{entry_id}"{data}>'
        f'<header class="msg-head"><span class="who">{escape(item.who)}</span>'
        f'<span class="meta">{escape(item.meta)}</span>'
        f'<a class="permalink" href="#entry={href}" data-id="{entry_id}" title="Link to this entry">#</a></header>'
        f"{item.inner}</article>"
    )


def _script_json(value: Any) -> str:
    # Inside <script>, "</script>" or "<!--" in an id would end or confuse the element.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


@dataclass
class SessionSetup:
    """What a live session runs with and its file does not hold: pi's export shows both."""

    system_prompt: str
    tools: list[ToolSpec]

    @staticmethod
    async def of(session: SessionClient) -> SessionSetup | None:
        """The setup the session's workflow runs with (None when its history cannot say)."""
        try:
            config = await session.running_config()
        except SessionNotFound:
            return None
        names = [
            name for name in config.tools if name in TOOL_DEFINITIONS
        ]  # MCP/extension tools: by name only
        return SessionSetup(config.system_prompt, tool_specs(names))


SYSTEM_PROMPT_PREVIEW_LINES = 10


def _system_prompt_html(prompt: str) -> str:
    lines = prompt.split("\n")
    preview = "\n".join(lines[:SYSTEM_PROMPT_PREVIEW_LINES])
    more = len(lines) - SYSTEM_PROMPT_PREVIEW_LINES
    if more <= 0:
        return f'<section class="system-prompt"><h2>System Prompt</h2><pre>{escape(prompt)}</pre></section>'
    return (
        f'<section class="system-prompt"><h2>System Prompt</h2><details><summary><pre>{escape(preview)}</pre>'
        f'<span class="dim">… ({more} more lines, click to expand)</span></summary>'
        f"<pre>{escape(prompt)}</pre></details></section>"
    )


def _tools_html(tools: list[ToolSpec]) -> str:
    items = []
    for tool in tools:
        properties = tool.parameters.get("properties") or {}
        required = set(tool.parameters.get("required") or [])
        params = "".join(
            f'<li><span class="param">{escape(name)}</span> <span class="dim">{escape(str(prop.get("type", "any")))} '
            f"{'required' if name in required else 'optional'}</span>"
            + (f"<div>{escape(str(prop['description']))}</div>" if prop.get("description") else "")
            + "</li>"
            for name, prop in properties.items()
        )
        summary = f'<span class="tool-name">{escape(tool.name)}</span> - {escape(tool.description)}'
        items.append(f"<li><details><summary>{summary}</summary><ul>{params}</ul></details></li>" if params
                     else f"<li>{summary}</li>")  # fmt: skip
    return f'<section class="tools-list"><h2>Available Tools</h2><ul>{"".join(items)}</ul></section>'


def _setup_html(setup: SessionSetup | None) -> str:
    if setup is None:
        return ""
    prompt = _system_prompt_html(setup.system_prompt) if setup.system_prompt else ""
    return prompt + (_tools_html(setup.tools) if setup.tools else "")


def _download_link(session_id: str, jsonl: bytes | None) -> str:
    """pi's "↓ JSONL": the session file itself, byte for byte, inside the page."""
    if jsonl is None:
        return ""
    data = base64.b64encode(jsonl).decode("ascii")
    return (
        f'<a class="download" download="{escape(session_id)}.jsonl" title="Download the session as JSONL" '
        f'href="data:application/x-ndjson;base64,{data}">↓ JSONL</a>'
    )


def _shown_entries(loaded: LoadedSession) -> dict[str, _Shown]:
    entries = loaded.tree.entries
    results: dict[str, dict[str, Any]] = {}
    for entry in entries:
        message = entry_message(entry)
        if message is not None and message.role == "toolResult":
            data = message.to_json_dict()
            results[str(data.get("toolCallId"))] = data
    shown: dict[str, _Shown] = {}
    for entry in entries:
        item = _shown(entry, results)
        if item is not None:
            shown[entry.id] = item
    return shown


@dataclass
class SessionTree:
    """The sidebar's tree of a session, as the export draws it (the console shows the same)."""

    html: str
    messages: int
    branches: int

    @property
    def title(self) -> str:
        return f"{self.messages} messages · {self.branches} branch{'es' if self.branches != 1 else ''}"


def session_tree(loaded: LoadedSession, shown: dict[str, _Shown] | None = None) -> SessionTree:
    shown = _shown_entries(loaded) if shown is None else shown
    entries = loaded.tree.entries
    return SessionTree(
        html=_tree_html(shown, entries, loaded.tree.labels()),
        messages=sum(1 for item in shown.values() if item.in_tree),
        branches=sum(1 for entry in entries if not loaded.tree.children(entry.id)),
    )


def render_session_html(
    loaded: LoadedSession, *, setup: SessionSetup | None = None, jsonl: bytes | None = None
) -> str:
    entries = loaded.tree.entries
    shown = _shown_entries(loaded)

    leaf = loaded.tree.leaf_id
    path = loaded.tree.path_to(leaf) if leaf else []
    path_ids = {entry.id for entry in path}
    session, branch = Stats(), Stats()
    for entry in entries:
        session.add_time(_ms(entry))
        message = entry_message(entry)
        if message is not None:
            session.add_message(message.to_json_dict())
    for entry in path:
        branch.add_time(_ms(entry))
        message = entry_message(entry)
        if message is not None:
            branch.add_message(message.to_json_dict())

    header = loaded.header
    title = loaded.tree.session_name() or f"Session {header.id[:8]}"
    meta = f"{header.id} · {header.cwd} · started {header.timestamp}"
    if header.parent_session:
        meta += f" · forked from {header.parent_session}"
    nodes = {entry.id: [entry.parent_id, _ms(entry)] for entry in entries}
    articles = "".join(_article(item, key in path_ids) for key, item in shown.items())
    tree = session_tree(loaded, shown)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_asset('viewer.css')}</style></head>"
        f'<body data-leaf="{escape(leaf or "")}"><div id="app">'
        '<aside id="sidebar"><div class="side-head">'
        '<input id="search" type="search" placeholder="Search messages  ( / )" autocomplete="off">'
        f'<div id="search-status" class="dim"></div></div>'
        f'<div class="side-title dim">{tree.title}</div>'
        f'<nav id="tree">{tree.html}</nav></aside>'
        '<main id="content"><header id="top">'
        f'<h1>{escape(title)}</h1><div class="dim meta">{escape(meta)}</div>'
        f"{stats_table(branch, session)}"
        '<div class="toolbar"><button type="button" data-toggle="tool">Expand tool calls</button>'
        '<button type="button" data-toggle="thinking">Expand thinking</button>'
        f"{_download_link(header.id, jsonl)}</div>{_setup_html(setup)}</header>"
        f'<div id="messages">{articles}</div></main></div>'
        f'<script id="tempi-nodes" type="application/json">{_script_json(nodes)}</script>'
        f"<script>{_asset('viewer.js')}</script></body></html>\n"
    )


def export_session_html(
    store: SessionStore, source: Path, target: Path, setup: SessionSetup | None = None
) -> Path:
    """`setup`: the system prompt and tools of the live session being exported (an export
    of a file alone has neither, as in pi)."""
    html = render_session_html(store.load(source), setup=setup, jsonl=source.read_bytes())
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(html, encoding="utf-8")
    return target
