"""The `attach` tool as a model meets it: it names a file in the working directory for the
front end to share, and refuses what it must not share."""

from __future__ import annotations

from pathlib import Path

from tempi.activities.tools import ToolContext, execute_tool
from tempi.agent.tool_specs import ALL_TOOLS


async def test_attach_names_a_workspace_file_and_refuses_others(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "chart.png").write_bytes(b"\x89PNG")
    (tmp_path / "secret.txt").write_text("not for Slack")
    ctx = ToolContext(cwd=str(work))

    shared = await execute_tool("attach", {"label": "chart", "path": "chart.png"}, ctx)
    assert not shared.is_error
    assert shared.details == {"path": str(work / "chart.png"), "title": "chart.png"}
    assert shared.content[0].to_json_dict()["text"] == "Attached file: chart.png"

    outside = await execute_tool("attach", {"label": "x", "path": "../secret.txt"}, ctx)
    assert outside.is_error and "only files inside" in outside.content[0].to_json_dict()["text"]
    missing = await execute_tool("attach", {"label": "x", "path": "nope.txt"}, ctx)
    assert missing.is_error and "File not found: nope.txt" in missing.content[0].to_json_dict()["text"]
    folder = await execute_tool("attach", {"label": "x", "path": "."}, ctx)
    assert folder.is_error

    # It is no coding tool: `--tools` does not offer it, only `tempi slack` adds it.
    assert "attach" not in ALL_TOOLS
