"""`tempi sessions list|show|export`: the sessions on this machine."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError

from tempi.agent.session_entries import CompactionEntry
from tempi.agent.session_tree import entry_message
from tempi.cli.errors import UserError
from tempi.cli.html_export import default_export_path, export_session_html
from tempi.cli.session_choice import find_session_path
from tempi.client.transcript import user_text
from tempi.config.errors import ConfigError
from tempi.config.paths import session_roots
from tempi.config.settings import load_settings
from tempi.store.catalog import SessionSummary, list_sessions_in
from tempi.store.errors import SessionFileError
from tempi.store.session_store import SessionStore
from tempi.workers.temporal_client import TemporalUnreachable
from tempi.workflows.session_types import SESSION_WORKFLOW, workflow_id_for

EXAMPLES = """\
examples:
  tempi sessions list                      all sessions, newest first
  tempi sessions list --here               sessions of this directory
  tempi sessions show 3f2a                 the conversation of session 3f2a...
  tempi sessions export 3f2a               write tempi-session-<file>.html here
  tempi sessions export 3f2a --html a.html
  tempi sessions path 3f2a                 the session's file, e.g. for pi --session "$(...)"

SESSION is an id, a unique id prefix or a session file. pi's sessions
($PI_CODING_AGENT_DIR/sessions) and those in the sessionDir of settings.json are listed and
found too.
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tempi sessions",
        description="List, read and export sessions.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="action", required=True, metavar="{list,show,export,path}")
    ls = sub.add_parser(
        "list",
        help="a table of sessions",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ls.add_argument("--here", action="store_true", help="only sessions of the current directory")
    ls.add_argument("--limit", type=int, default=50, help="show at most this many (default 50)")
    ls.add_argument("--no-status", action="store_true", help="do not ask Temporal which sessions are running")
    ls.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    show = sub.add_parser(
        "show",
        help="the conversation, readable",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    show.add_argument("session", help="id, id prefix or file")
    show.add_argument("--full", action="store_true", help="do not shorten tool output")
    export = sub.add_parser(
        "export",
        help="a self-contained HTML page",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    export.add_argument("session", help="id, id prefix or file")
    export.add_argument("--html", metavar="OUT", help="output file (default tempi-session-<file>.html here)")
    path = sub.add_parser(
        "path",
        help="the session's file (pi reads it: pi --session FILE)",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    path.add_argument("session", help="id, id prefix or file")
    return p


def configured_session_dir(cwd: Path) -> Path | None:
    """settings.json's sessionDir, whose sessions pi lists and finds too."""
    try:
        return load_settings(cwd).session_dir_path(cwd)
    except ConfigError as err:
        raise UserError(str(err)) from err


async def cmd_sessions(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    store = SessionStore(*session_roots())
    cwd = Path.cwd().resolve()
    if args.action == "list":
        return await _list(store, args, configured_session_dir(cwd))
    path = find_session_path(store, args.session, configured_session_dir(cwd))
    if args.action == "path":
        print(path)
        return 0
    if args.action == "show":
        _show(store, path, full=args.full)
        return 0
    target = Path(args.html) if args.html else default_export_path(path)
    export_html_file(store, path, target)
    return 0


def export_html_file(store: SessionStore, source: Path, target: Path) -> None:
    try:
        written = export_session_html(store, source, target)
    except SessionFileError as err:
        raise UserError(str(err)) from err
    except OSError as err:
        raise UserError(f"Cannot write {target}: {err.strerror or err}") from err
    print(f"Exported to {written}")


# --- list ------------------------------------------------------------------------------


async def open_sessions(client: Client, wanted: set[str]) -> dict[str, bool]:
    """Open session workflows among `wanted` (workflow ids): whether each is working now.
    Working = an activity (model call or tool) is pending, which needs no worker to tell."""
    found: dict[str, bool] = {}
    query = f"WorkflowType='{SESSION_WORKFLOW}' AND ExecutionStatus='Running'"
    async for wf in client.list_workflows(query):
        if wf.id in wanted:
            found[wf.id] = False

    async def describe(workflow_id: str) -> None:
        try:
            desc = await client.get_workflow_handle(workflow_id).describe(rpc_timeout=timedelta(seconds=5))
        except RPCError:
            return
        found[workflow_id] = bool(desc.raw_description.pending_activities)

    await asyncio.gather(*(describe(w) for w in found))
    return found


async def _statuses(summaries: list[SessionSummary], no_status: bool) -> dict[str, str]:
    if no_status:
        return {}
    from tempi.cli.runtime import open_runtime  # brings in the worker and provider SDKs

    try:
        async with open_runtime(no_worker=True, quiet=True) as rt:
            working = await open_sessions(rt.client, {workflow_id_for(s.id) for s in summaries})
    except (TemporalUnreachable, RPCError) as err:
        print(f"tempi: cannot tell which sessions are running ({err})", file=sys.stderr)
        return {}
    return {s.id: "running" if working.get(workflow_id_for(s.id)) else "idle" for s in summaries}


def _short_cwd(cwd: str) -> str:
    home = str(Path.home())
    return "~" + cwd[len(home) :] if cwd.startswith(home) else cwd


def _summaries(store: SessionStore, here: str | None, session_dir: Path | None) -> list[SessionSummary]:
    found = {s.path: s for s in store.list_sessions(here)}
    if session_dir is not None:
        found |= {s.path: s for s in list_sessions_in(session_dir) if here is None or s.cwd == here}
    return sorted(found.values(), key=lambda s: s.modified, reverse=True)


async def _list(store: SessionStore, args: argparse.Namespace, session_dir: Path | None) -> int:
    here = str(Path.cwd().resolve()) if args.here else None
    summaries = _summaries(store, here, session_dir)[: max(args.limit, 0)]
    if not summaries:
        where = "this directory" if args.here else " or ".join(str(root) for root in store.roots)
        print(f'No sessions in {where} yet. Start one with tempi -p "...".')
        return 0
    statuses = await _statuses(summaries, args.no_status)
    if args.json:
        for s in summaries:
            row: dict[str, Any] = json.loads(s.model_dump_json(by_alias=True))
            row["status"] = statuses.get(s.id, "unknown")
            print(json.dumps(row, ensure_ascii=False))
        return 0
    rows = [
        (
            s.id[:8],
            (s.name or (s.first_message or "").replace("\n", " "))[:40],
            _short_cwd(s.cwd),
            s.modified.astimezone().strftime("%Y-%m-%d %H:%M"),
            str(s.message_count),
            statuses.get(s.id, "?"),
        )
        for s in summaries
    ]
    head = ("ID", "NAME", "CWD", "UPDATED", "MSGS", "STATUS")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print(
            "  ".join(
                cell.ljust(w) if i != 4 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(r, widths, strict=True))
            ).rstrip()
        )
    return 0


# --- show ------------------------------------------------------------------------------

SHORT_OUTPUT_LINES = 12


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.split("\n"))


def _shorten(text: str, full: bool) -> str:
    lines = text.rstrip("\n").split("\n")
    if full or len(lines) <= SHORT_OUTPUT_LINES:
        return "\n".join(lines)
    hidden = len(lines) - SHORT_OUTPUT_LINES
    return "\n".join([*lines[:SHORT_OUTPUT_LINES], f"... {hidden} more lines (--full shows all)"])


def _show(store: SessionStore, path: Path, *, full: bool) -> None:
    try:
        loaded = store.load(path)
    except SessionFileError as err:
        raise UserError(str(err)) from err
    header = loaded.header
    print(f"Session {header.id}  {loaded.tree.session_name() or ''}".rstrip())
    print(f"  cwd {header.cwd}, started {header.timestamp}, file {path}")
    if header.parent_session:
        print(f"  forked from {header.parent_session}")
    leaf = loaded.tree.leaf_id
    for entry in loaded.tree.path_to(leaf) if leaf else []:
        if isinstance(entry, CompactionEntry):
            print(
                f"\n[earlier conversation compacted, {entry.tokens_before} tokens]\n{_indent(entry.summary)}"
            )
            continue
        message = entry_message(entry)
        if message is None:
            continue
        _print_message(message.to_json_dict(), full)
    print()


def _print_message(m: dict[str, Any], full: bool) -> None:
    role = m.get("role")
    if role == "user":
        print(f"\n> {user_text(m)}")
    elif role == "assistant":
        print()
        for block in m.get("content") or []:
            if block.get("type") == "text" and block.get("text"):
                print(block["text"])
            elif block.get("type") == "thinking" and block.get("thinking"):
                print(_indent(block["thinking"], "  ~ "))
            elif block.get("type") == "toolCall":
                args = block.get("arguments") or {}
                shown = (
                    args.get("command")
                    if block.get("name") == "bash"
                    else json.dumps(args, ensure_ascii=False)
                )
                print(f"  [{block.get('name')}] {_shorten(str(shown), full)}")
        if m.get("stopReason") in ("error", "aborted"):
            print(f"  ({m.get('stopReason')}: {m.get('errorMessage', '')})")
    elif role == "toolResult":
        mark = "!" if m.get("isError") else "="
        text = user_text(m)
        details = m.get("details")
        if isinstance(details, dict) and isinstance(details.get("diff"), str):
            text = details["diff"]
        print(_indent(_shorten(text, full), f"  {mark} "))
    elif role == "bashExecution":
        print(f"\n$ {m.get('command', '')}  (run by the user, exit {m.get('exitCode')})")
        print(_indent(_shorten(str(m.get("output", "")), full), "  = "))
    elif role in ("compactionSummary", "branchSummary"):
        print(f"\n[summary]\n{_indent(str(m.get('summary', '')))}")
    elif role == "custom":
        print(f"\n[{m.get('customType', 'custom')}] {user_text(m)}")
