"""An MCP tool's answer as a tool result: text cut to pi's limits (the head kept, as for
read), images kept as image blocks, other blocks described in text."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tempi.agent.messages import ImageContent, TextContent
from tempi.agent.truncation import DEFAULT_MAX_BYTES, format_size, truncate_head

if TYPE_CHECKING:
    from mcp import types as mcp_types

Block = TextContent | ImageContent


def result_blocks(result: mcp_types.CallToolResult) -> tuple[list[Block], dict[str, Any]]:
    """The blocks the model gets and the details kept beside them."""
    from mcp import types as mcp_types

    texts: list[str] = []
    images: list[Block] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            texts.append(block.text)
        elif isinstance(block, mcp_types.ImageContent):
            images.append(ImageContent(data=block.data, mime_type=block.mime_type))
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            text = getattr(resource, "text", None)
            texts.append(
                text if text is not None else f"[resource {resource.uri} ({resource.mime_type or 'binary'})]"
            )
        elif isinstance(block, mcp_types.ResourceLink):
            texts.append(f"[resource link {block.uri}]")
        else:
            texts.append(f"[{block.type} content]")
    if not texts and not images and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text, details = _cut("\n".join(texts))
    blocks: list[Block] = [TextContent(text=text)] if text or not images else []
    return [*blocks, *images], details


def _cut(text: str) -> tuple[str, dict[str, Any]]:
    cut = truncate_head(text)
    if not cut.truncated:
        return text, {}
    if cut.first_line_exceeds_limit:
        kept = text.encode("utf-8")[:DEFAULT_MAX_BYTES].decode("utf-8", "ignore")
        note = f"[Output truncated: showing the first {format_size(DEFAULT_MAX_BYTES)} of {format_size(cut.total_bytes)}]"
        return f"{kept}\n\n{note}", {"truncation": cut.to_json_dict()}
    why = "" if cut.truncated_by == "lines" else f" ({format_size(DEFAULT_MAX_BYTES)} limit)"
    note = f"[Output truncated: showing {cut.output_lines} of {cut.total_lines} lines{why}]"
    return f"{cut.content}\n\n{note}", {"truncation": cut.to_json_dict()}
