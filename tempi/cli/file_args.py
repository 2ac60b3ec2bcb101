"""`@file` arguments: text files are inlined into the prompt, images attached to it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tempi.agent.messages import ImageContent


class FileArgError(Exception):
    """An @file that cannot be used; the message names it."""


@dataclass
class FileAttachments:
    text: str = ""
    images: list[ImageContent] = field(default_factory=list)


def split_file_args(words: list[str]) -> tuple[list[str], list[str]]:
    """(messages, file paths): words starting with `@` name files."""
    messages = [w for w in words if not w.startswith("@")]
    files = [w[1:] for w in words if w.startswith("@") and len(w) > 1]
    return messages, files


def read_file_args(paths: list[str], cwd: Path) -> FileAttachments:
    out = FileAttachments()
    if not paths:
        return out
    # Only with @files: it loads the tools package and Pillow, a tenth of a second that every
    # other command goes without.
    from tempi.activities.tools.images import detect_image_mime, prepare_image

    for raw in paths:
        path = (cwd / Path(raw).expanduser()).resolve()
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise FileArgError(f"File not found: {path} (from @{raw})") from None
        except OSError as err:
            raise FileArgError(f"Cannot read {path} (from @{raw}): {err.strerror or err}") from None
        if not data:
            continue
        mime = detect_image_mime(data[:16])
        if mime is not None:
            try:
                image = prepare_image(data, mime)
            except ValueError as err:
                out.text += f'<file name="{path}">[Image left out: {err}.]</file>\n'
                continue
            out.images.append(ImageContent(data=image.data, mime_type=image.mime_type))
            out.text += f'<file name="{path}">{image.note or ""}</file>\n'
            continue
        try:
            content = data.decode("utf-8")
        except UnicodeDecodeError:
            raise FileArgError(
                f"{path} (from @{raw}) is neither text (UTF-8) nor a supported image"
            ) from None
        out.text += f'<file name="{path}">\n{content}\n</file>\n'
    return out
