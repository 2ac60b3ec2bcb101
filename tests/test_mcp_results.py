"""What the model gets from an MCP tool: names the model APIs accept, pi's truncation limits, images as images."""

from __future__ import annotations

from mcp import types

from tempi.activities.mcp.results import result_blocks
from tempi.agent.mcp_tools import mcp_tool_name
from tempi.agent.messages import ImageContent, TextContent


def test_long_text_is_cut_to_pi_limits_and_images_stay_images() -> None:
    lines = "\n".join(f"row {i}" for i in range(5000))
    answer = types.CallToolResult(
        content=[
            types.TextContent(type="text", text=lines),
            types.ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
        ]
    )
    blocks, details = result_blocks(answer)
    assert isinstance(blocks[0], TextContent) and isinstance(blocks[1], ImageContent)
    text = blocks[0].text
    assert text.startswith("row 0\n") and "row 1999\n" in text and "row 2000" not in text
    assert text.endswith("[Output truncated: showing 2000 of 5000 lines]")
    assert details["truncation"]["totalLines"] == 5000
    assert blocks[1].mime_type == "image/png"


def test_one_huge_line_keeps_its_first_50kb() -> None:
    answer = types.CallToolResult(content=[types.TextContent(type="text", text="x" * 200_000)])
    blocks, _ = result_blocks(answer)
    assert isinstance(blocks[0], TextContent)
    assert blocks[0].text.startswith(
        "x" * 51_200 + "\n\n[Output truncated: showing the first 50.0KB of 195.3KB]"
    )


def test_structured_only_answer_is_given_as_json() -> None:
    answer = types.CallToolResult(content=[], structured_content={"count": 3})
    blocks, details = result_blocks(answer)
    assert blocks == [TextContent(text='{"count": 3}')] and details == {}


def test_tool_names_are_ones_the_model_apis_accept() -> None:
    assert mcp_tool_name("docs", "search") == "mcp__docs__search"
    assert mcp_tool_name("docs", "get.page v2") == "mcp__docs__get_page_v2"
    assert len(mcp_tool_name("docs", "x" * 100)) == 64
