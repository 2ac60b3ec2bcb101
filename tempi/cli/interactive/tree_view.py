"""pi's /tree selector without the terminal: the session's entries drawn as a tree with
connectors (├─ └─ │), the current branch marked and listed first, branches folded and
unfolded, searched by typing, and a cursor that moves as pi's does."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from prompt_toolkit.formatted_text import StyleAndTextTuples

from tempi.agent.session_entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
)
from tempi.agent.session_tree import SessionTree

# Bookkeeping pi's default view leaves out.
HIDDEN_TYPES = (LabelEntry, CustomEntry, ModelChangeEntry, ThinkingLevelChangeEntry, SessionInfoEntry)
HELP = "  ↑/↓: move. ←/→: page. ^←/^→ or Alt+←/Alt+→: fold/branch. Enter: go there. Esc: cancel"
MAX_TEXT = 200


@dataclass
class _Row:
    """One visible entry and how it is drawn (pi's flat node)."""

    entry: SessionEntry
    indent: int = 0
    show_connector: bool = False
    is_last: bool = False
    gutters: list[tuple[int, bool]] = field(default_factory=list)
    virtual_root_child: bool = False


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content[:MAX_TEXT]
    out = ""
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "text":
            out += str(block.get("text") or "")
            if len(out) >= MAX_TEXT:
                return out[:MAX_TEXT]
    return out


def _normal(text: str) -> str:
    return text.replace("\n", " ").replace("\t", " ").strip()


def _home(path: str) -> str:
    home = os.path.expanduser("~")
    return "~" + path[len(home) :] if home not in ("", "/") and path.startswith(home) else path


def tool_call_text(name: str, args: dict[str, Any]) -> str:
    """How pi names a tool call in the tree."""
    path = _home(str(args.get("path") or args.get("file_path") or ""))
    if name == "read":
        offset, limit = args.get("offset"), args.get("limit")
        if offset is not None or limit is not None:
            start = offset or 1
            path += f":{start}" + (f"-{start + limit - 1}" if limit is not None else "")
        return f"[read: {path}]"
    if name in ("write", "edit"):
        return f"[{name}: {path}]"
    if name == "bash":
        raw = str(args.get("command") or "")
        return f"[bash: {_normal(raw)[:50]}{'...' if len(raw) > 50 else ''}]"
    where = _home(str(args.get("path") or "."))
    if name == "grep":
        return f"[grep: /{args.get('pattern') or ''}/ in {where}]"
    if name == "find":
        return f"[find: {args.get('pattern') or ''} in {where}]"
    if name == "ls":
        return f"[ls: {where}]"
    whole = json.dumps(args)
    return f"[{name}: {whole[:40]}{'...' if len(whole) > 40 else ''}]"


class TreeView:
    def __init__(
        self, tree: SessionTree, leaf_id: str | None, *, max_lines: int = 10, selected_id: str | None = None
    ) -> None:
        self.tree = tree
        self.leaf_id = leaf_id
        self.max_lines = max(5, max_lines)
        self.query = ""
        self.folded: set[str] = set()
        self.labels = tree.labels()
        self.active: set[str] = (
            {e.id for e in tree.path_to(leaf_id)} if leaf_id and leaf_id in tree else set()
        )
        self.tool_calls: dict[str, tuple[str, dict[str, Any]]] = {}
        self.order = self._pre_order()
        self.rows: list[_Row] = []
        self.visible_parent: dict[str, str | None] = {}
        self.visible_children: dict[str | None, list[str]] = {}
        self.multiple_roots = False
        self.index = 0
        self._apply(selected_id or leaf_id)

    # --- structure -----------------------------------------------------------------------

    def _pre_order(self) -> list[SessionEntry]:
        """Every entry, depth first, the branch holding the current leaf before its siblings."""
        out: list[SessionEntry] = []

        def ordered(entries: list[SessionEntry]) -> list[SessionEntry]:
            return sorted(entries, key=lambda e: e.id not in self.active)

        stack = list(reversed(ordered(self.tree.children(None))))
        # Entries sharing an id can make a child its own ancestor: list each id once.
        listed: set[str] = set()
        while stack:
            entry = stack.pop()
            if entry.id in listed:
                continue
            listed.add(entry.id)
            out.append(entry)
            if isinstance(entry, MessageEntry) and entry.message.role == "assistant":
                for block in entry.message.to_json_dict().get("content") or []:
                    if isinstance(block, dict) and block.get("type") == "toolCall":
                        self.tool_calls[str(block.get("id"))] = (
                            str(block.get("name") or ""),
                            block.get("arguments") or {},
                        )
            stack.extend(reversed(ordered(self.tree.children(entry.id))))
        return out

    def _shown(self, entry: SessionEntry, words: list[str]) -> bool:
        if isinstance(entry, MessageEntry) and entry.message.role == "assistant" and entry.id != self.leaf_id:
            message = entry.message.to_json_dict()
            stopped = message.get("stopReason") not in (None, "stop", "toolUse")
            if not _normal(_text(message.get("content"))) and not stopped:
                return False
        if isinstance(entry, HIDDEN_TYPES):
            return False
        if words:
            text = f"{self.labels.get(entry.id, '')} {self.entry_text(entry)}".lower()
            return all(w in text for w in words)
        return True

    def _apply(self, keep_id: str | None) -> None:
        """Filter, fold and lay out the visible tree again, keeping the cursor on `keep_id`
        (or the nearest visible entry above it)."""
        words = self.query.lower().split()
        visible = [e for e in self.order if self._shown(e, words)]
        hidden_below: set[str] = set()
        for entry in self.order:
            if entry.parent_id is not None and (
                entry.parent_id in self.folded or entry.parent_id in hidden_below
            ):
                hidden_below.add(entry.id)
        visible = [e for e in visible if e.id not in hidden_below]
        ids = {e.id for e in visible}

        def visible_ancestor(entry: SessionEntry) -> str | None:
            parent = entry.parent_id
            passed: set[str] = set()  # parentIds that loop end the walk
            while parent is not None and parent not in ids and parent not in passed:
                passed.add(parent)
                above = self.tree.get(parent)
                parent = above.parent_id if above else None
            return parent if parent in ids else None

        self.visible_parent = {}
        self.visible_children = {None: []}
        for entry in visible:
            parent = visible_ancestor(entry)
            self.visible_parent[entry.id] = parent
            self.visible_children.setdefault(parent, []).append(entry.id)
        roots = self.visible_children[None]
        self.multiple_roots = len(roots) > 1
        rows: dict[str, _Row] = {e.id: _Row(e) for e in visible}
        # pi's layout: a branch point indents its children, and so does the first entry after
        # a branch; a connector leaves a gutter (│) for the rows below it while siblings follow.
        stack: list[tuple[str, int, bool, bool, bool, list[tuple[int, bool]], bool]] = []
        for i in range(len(roots) - 1, -1, -1):
            many = self.multiple_roots
            stack.append((roots[i], 1 if many else 0, many, many, i == len(roots) - 1, [], many))
        laid_out: set[str] = set()  # a damaged file's parentIds may loop: each row once
        while stack:
            entry_id, indent, just_branched, connector, is_last, gutters, virtual = stack.pop()
            if entry_id in laid_out:
                continue
            laid_out.add(entry_id)
            row = rows[entry_id]
            row.indent, row.show_connector, row.is_last = indent, connector, is_last
            row.gutters, row.virtual_root_child = gutters, virtual
            children = self.visible_children.get(entry_id, [])
            many = len(children) > 1
            child_indent = indent + 1 if many or (just_branched and indent > 0) else indent
            shown_indent = max(0, indent - 1) if self.multiple_roots else indent
            child_gutters = (
                [*gutters, (max(0, shown_indent - 1), not is_last)] if connector and not virtual else gutters
            )
            for i in range(len(children) - 1, -1, -1):
                stack.append(
                    (children[i], child_indent, many, many, i == len(children) - 1, child_gutters, False)
                )
        self.rows = [rows[e.id] for e in visible]
        self.index = self._nearest(keep_id)

    def _nearest(self, entry_id: str | None) -> int:
        if not self.rows:
            return 0
        where = {row.entry.id: i for i, row in enumerate(self.rows)}
        passed: set[str] = set()  # parentIds that loop end the walk
        while entry_id is not None and entry_id not in passed:
            if entry_id in where:
                return where[entry_id]
            passed.add(entry_id)
            entry = self.tree.get(entry_id)
            entry_id = entry.parent_id if entry else None
        return len(self.rows) - 1

    # --- what an entry says ----------------------------------------------------------------

    def entry_text(self, entry: SessionEntry) -> str:
        if isinstance(entry, MessageEntry):
            message = entry.message.to_json_dict()
            role = message.get("role")
            if role == "user":
                return f"user: {_normal(_text(message.get('content')))}"
            if role == "assistant":
                text = _normal(_text(message.get("content")))
                if text:
                    return f"assistant: {text}"
                if message.get("stopReason") == "aborted":
                    return "assistant: (aborted)"
                if message.get("errorMessage"):
                    return f"assistant: {_normal(str(message['errorMessage']))[:80]}"
                return "assistant: (no content)"
            if role == "toolResult":
                call = self.tool_calls.get(str(message.get("toolCallId")))
                return tool_call_text(*call) if call else f"[{message.get('toolName') or 'tool'}]"
            if role == "bashExecution":
                return f"[bash]: {_normal(str(message.get('command') or ''))}"
            return f"[{role}]"
        if isinstance(entry, CustomMessageEntry):
            return f"[{entry.custom_type}]: {_normal(_text(entry.model_dump(mode='json')['content']))}"
        if isinstance(entry, CompactionEntry):
            return f"[compaction: {round(entry.tokens_before / 1000)}k tokens]"
        if isinstance(entry, BranchSummaryEntry):
            return f"[branch summary]: {_normal(entry.summary)}"
        if isinstance(entry, ModelChangeEntry):
            return f"[model: {entry.model_id}]"
        if isinstance(entry, ThinkingLevelChangeEntry):
            return f"[thinking: {entry.thinking_level}]"
        return f"[{entry.type}]"

    # --- moving ------------------------------------------------------------------------------

    def selected_id(self) -> str | None:
        return self.rows[self.index].entry.id if self.rows else None

    def move(self, step: int) -> None:
        if self.rows:
            self.index = (self.index + step) % len(self.rows)

    def page(self, step: int) -> None:
        if self.rows:
            self.index = min(len(self.rows) - 1, max(0, self.index + step * self.max_lines))

    def foldable(self, entry_id: str) -> bool:
        """An entry with visible children that is a root or starts a branch."""
        if not self.visible_children.get(entry_id):
            return False
        parent = self.visible_parent.get(entry_id)
        return parent is None or len(self.visible_children.get(parent, [])) > 1

    def fold_or_up(self) -> None:
        current = self.selected_id()
        if current is not None and self.foldable(current) and current not in self.folded:
            self.folded.add(current)
            self._apply(current)
        else:
            self.index = self._segment_start(up=True)

    def unfold_or_down(self) -> None:
        current = self.selected_id()
        if current is not None and current in self.folded:
            self.folded.discard(current)
            self._apply(current)
        else:
            self.index = self._segment_start(up=False)

    def _segment_start(self, *, up: bool) -> int:
        current = self.selected_id()
        if current is None:
            return self.index
        where = {row.entry.id: i for i, row in enumerate(self.rows)}
        if not up:
            while True:
                children = self.visible_children.get(current, [])
                if not children:
                    return where[current]
                if len(children) > 1:
                    return where[children[0]]
                current = children[0]
        while True:
            parent = self.visible_parent.get(current)
            if parent is None:
                return where[current]
            if len(self.visible_children.get(parent, [])) > 1 and where[current] < self.index:
                return where[current]
            current = parent

    def type(self, text: str) -> None:
        self.query += text
        self.folded.clear()
        self._apply(self.selected_id())

    def backspace(self) -> None:
        if self.query:
            self.query = self.query[:-1]
            self.folded.clear()
            self._apply(self.selected_id())

    def clear_query(self) -> bool:
        """Esc first clears a search, as in pi; True when there was one."""
        if not self.query:
            return False
        self.query = ""
        self.folded.clear()
        self._apply(self.selected_id())
        return True

    # --- drawing -----------------------------------------------------------------------------

    def prefix(self, row: _Row) -> str:
        shown = max(0, row.indent - 1) if self.multiple_roots else row.indent
        connector = row.show_connector and not row.virtual_root_child
        at = shown - 1 if connector else -1
        folded = row.entry.id in self.folded
        chars: list[str] = []
        gutters = dict(row.gutters)
        for i in range(shown * 3):
            level, pos = divmod(i, 3)
            if level in gutters:
                chars.append(("│" if gutters[level] else " ") if pos == 0 else " ")
            elif connector and level == at:
                if pos == 0:
                    chars.append("└" if row.is_last else "├")
                elif pos == 1:
                    chars.append("⊞" if folded else "⊟" if self.foldable(row.entry.id) else "─")
                else:
                    chars.append(" ")
            else:
                chars.append(" ")
        return "".join(chars)

    def row_text(self, row: _Row) -> str:
        """One line of the tree, without the cursor."""
        connector = row.show_connector and not row.virtual_root_child
        fold = "⊞ " if row.entry.id in self.folded and not connector else ""
        path = "• " if row.entry.id in self.active else ""
        label = f"[{self.labels[row.entry.id]}] " if row.entry.id in self.labels else ""
        return f"{self.prefix(row)}{fold}{path}{label}{self.entry_text(row.entry)}"

    def lines(self) -> StyleAndTextTuples:
        out: StyleAndTextTuples = [
            ("class:picker.title", "  Session Tree\n"),
            ("class:picker.hint", HELP + "\n"),
            ("class:picker.hint", f"  Type to search: {self.query}\n"),
        ]
        if not self.rows:
            out.append(("class:picker.hint", "  No entries found\n  (0/0)\n"))
            return out
        start = max(0, min(self.index - self.max_lines // 2, len(self.rows) - self.max_lines))
        for i in range(start, min(start + self.max_lines, len(self.rows))):
            selected = i == self.index
            style = "class:picker.selected" if selected else ""
            out.append((style, f"{'› ' if selected else '  '}{self.row_text(self.rows[i])}\n"))
        out.append(("class:picker.hint", f"  ({self.index + 1}/{len(self.rows)})\n"))
        return out
