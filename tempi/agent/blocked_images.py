"""settings.json's `images.blockImages`: no image reaches the model. As in pi, each image of
a user message or tool result becomes a note saying so (one note for a run of images)."""

from __future__ import annotations

from tempi.agent.messages import ImageContent, LlmMessage, TextContent, ToolResultMessage, UserMessage

IMAGES_BLOCKED_TEXT = "Image reading is disabled."


def _blocked(blocks: list[TextContent | ImageContent]) -> list[TextContent | ImageContent]:
    out: list[TextContent | ImageContent] = []
    for block in blocks:
        if isinstance(block, TextContent):
            out.append(block)
        elif not (out and isinstance(out[-1], TextContent) and out[-1].text == IMAGES_BLOCKED_TEXT):
            out.append(TextContent(text=IMAGES_BLOCKED_TEXT))
    return out


def without_images(messages: list[LlmMessage]) -> list[LlmMessage]:
    out: list[LlmMessage] = []
    for message in messages:
        if (
            isinstance(message, UserMessage | ToolResultMessage)
            and not isinstance(message.content, str)
            and any(isinstance(b, ImageContent) for b in message.content)
        ):
            out.append(message.model_copy(update={"content": _blocked(message.content)}))
        else:
            out.append(message)
    return out
