"""How a run's attachments reach the model, as mom hands them over: images as image blocks,
other files as paths in a `<slack_attachments>` block after the message."""

from __future__ import annotations

from tempi.workflows.slack_types import SlackMessage

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".gif", ".webp")


def is_image(path: str) -> bool:
    return path.lower().endswith(IMAGE_SUFFIXES)


def with_attachments(text: str, messages: list[SlackMessage], working_dir: str) -> tuple[str, list[str]]:
    """The prompt text with non-image paths appended, and the image paths to send as blocks."""
    paths = [f"{working_dir}/{local}" for m in messages for local in m.attachments]
    others = [p for p in paths if not is_image(p)]
    if others:
        text += "\n\n<slack_attachments>\n" + "\n".join(others) + "\n</slack_attachments>"
    return text, [p for p in paths if is_image(p)]


def attachments_seen_from(text: str, working_dir: str, tool_dir: str) -> str:
    """The prompt with its attachment paths as the tools see them (`working_dir` mounted at
    `tool_dir` in a container); images were read on the host already."""
    head, marker, block = text.rpartition("<slack_attachments>\n")
    if not marker:
        return text
    return head + marker + block.replace(f"{working_dir}/", f"{tool_dir.rstrip('/')}/")
