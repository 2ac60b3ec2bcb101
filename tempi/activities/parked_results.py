"""Tool results parked beside the session file until the workflow commits its turn's
results in order, and the copy of each that crosses workflow history."""

from __future__ import annotations

import json
import os
from typing import Any, Protocol

from tempi.activities.llm.unicode_guard import holds_lone_surrogate
from tempi.activities.tools.names import escape_value
from tempi.agent.messages import ImageContent, TextContent, ToolResultMessage
from tempi.extensions.models import ExtensionEffects
from tempi.store.modes import create_private_file, make_private_dirs
from tempi.store.sidecar import pending_path
from tempi.workflows.activity_payloads import SessionFileRef, ToolCallResult


def park_entry(ref: SessionFileRef, entry: dict[str, Any]) -> None:
    """Store a finished tool result until the workflow commits the turn's results in order."""
    blob = pending_path(ref.session_path, ref.session_id, entry["id"])
    make_private_dirs(blob.parent)
    tmp = blob.with_suffix(".tmp")
    with open(create_private_file(tmp, os.O_WRONLY | os.O_TRUNC), "w", encoding="utf-8") as out:
        out.write(json.dumps(entry, ensure_ascii=False))
    os.replace(tmp, blob)


class ParkedCall(Protocol):
    """What a tool activity's input says about where its result entry goes."""

    @property
    def file(self) -> SessionFileRef: ...
    @property
    def entry_id(self) -> str: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def entry_timestamp(self) -> str: ...


def park_result(
    inp: ParkedCall, message: ToolResultMessage, effects: ExtensionEffects | None
) -> ToolCallResult:
    """Park a tool's result entry beside the session file and return what history carries:
    a reference-sized message, and the extensions' effects when there are any."""
    message = encodable(message)
    park_entry(
        inp.file,
        {
            "type": "message",
            "id": inp.entry_id,
            "parentId": inp.parent_id,
            "timestamp": inp.entry_timestamp,
            "message": message.to_json_dict(),
        },
    )
    return ToolCallResult(
        message=for_history(message), effects=effects if effects and not effects.empty() else None
    )


def find_parked(ref: SessionFileRef, entry_id: str) -> dict[str, Any] | None:
    try:
        return json.loads(pending_path(ref.session_path, ref.session_id, entry_id).read_text("utf-8"))
    except FileNotFoundError:
        return None


def encodable(message: ToolResultMessage) -> ToolResultMessage:
    """The result with text that UTF-8 can carry: a file name that is not valid UTF-8 (a
    lone surrogate from os.fsdecode) gets the \\xHH form the tools accept back."""
    data = message.to_json_dict()
    if not holds_lone_surrogate(data):
        return message
    return ToolResultMessage.model_validate(escape_value(data))


# A parked result larger than this crosses history as a shortened copy; the model gets the
# whole result from the session file. Temporal refuses payloads over 2 MB.
HISTORY_RESULT_BYTES = 1_000_000
_HISTORY_TEXT_CHARS = 100_000


def for_history(message: ToolResultMessage) -> ToolResultMessage:
    """What the workflow receives for a parked result: the result itself, or, near the
    payload limit, a copy without images and with long texts cut (events show that copy)."""
    if len(json.dumps(message.to_json_dict(), ensure_ascii=False).encode("utf-8")) <= HISTORY_RESULT_BYTES:
        return message
    content: list[TextContent | ImageContent] = []
    for block in message.content:
        if isinstance(block, ImageContent):
            size = len(block.data) * 3 // 4
            text = f"[{block.mime_type} image of {size / 1_000_000:.1f} MB: sent to the model, too large to show here]"
            content.append(TextContent(text=text))
        elif len(block.text) > _HISTORY_TEXT_CHARS:
            cut = block.text[:_HISTORY_TEXT_CHARS]
            content.append(
                TextContent(
                    text=f"{cut}\n\n[{len(block.text)} characters in all: shortened here, sent whole to the model]"
                )
            )
        else:
            content.append(block)
    details = message.details
    if len(json.dumps(details, ensure_ascii=False)) > _HISTORY_TEXT_CHARS:
        details = {"omitted": "too large to show; kept in the session file"}
    return message.model_copy(update={"content": content, "details": details})
