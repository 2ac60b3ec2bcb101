"""Recognising image files and shrinking them to what model APIs accept."""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import Image

MAX_DIMENSION = 2000
MAX_BASE64_BYTES = int(4.5 * 1024 * 1024)
_JPEG_QUALITIES = (85, 70, 55, 40)


@dataclass(frozen=True)
class PreparedImage:
    data: str  # base64
    mime_type: str
    note: str | None  # set when the image was resized


def detect_image_mime(head: bytes) -> str | None:
    """MIME type of a supported image from its first bytes (not its file name)."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _encode_candidates(image: Image.Image) -> list[tuple[bytes, str]]:
    candidates: list[tuple[bytes, str]] = []
    png = io.BytesIO()
    image.save(png, format="PNG", optimize=True)
    candidates.append((png.getvalue(), "image/png"))
    rgb = image.convert("RGB")
    for quality in _JPEG_QUALITIES:
        jpeg = io.BytesIO()
        rgb.save(jpeg, format="JPEG", quality=quality)
        candidates.append((jpeg.getvalue(), "image/jpeg"))
    return candidates


def prepare_image(data: bytes, mime_type: str) -> PreparedImage:
    """The image as base64, resized (and re-encoded) when it is larger than 2000x2000
    pixels or its base64 form is over 4.5 MB. Blocking: run it in a thread."""
    # Loaded on first use: every worker imports this module at start, few read images.
    from PIL import Image, UnidentifiedImageError

    encoded = _b64(data)
    try:
        image = Image.open(io.BytesIO(data))
        width, height = image.size
    except (UnidentifiedImageError, OSError):
        if len(encoded) <= MAX_BASE64_BYTES:
            return PreparedImage(encoded, mime_type, None)
        raise ValueError("the image is too large to send and could not be decoded to shrink it") from None
    if width <= MAX_DIMENSION and height <= MAX_DIMENSION and len(encoded) <= MAX_BASE64_BYTES:
        return PreparedImage(encoded, mime_type, None)

    scale = min(1.0, MAX_DIMENSION / width, MAX_DIMENSION / height)
    image.load()
    while True:
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        resized = image.resize(size, Image.Resampling.LANCZOS)
        fitting = [
            (blob, mime) for blob, mime in _encode_candidates(resized) if len(_b64(blob)) <= MAX_BASE64_BYTES
        ]
        if fitting:
            blob, mime = min(fitting, key=lambda candidate: len(candidate[0]))
            note = (
                f"[Image resized from {width}x{height} to {size[0]}x{size[1]}; multiply coordinates "
                f"by {width / size[0]:.2f} to map them to the original.]"
            )
            return PreparedImage(_b64(blob), mime, note)
        scale *= 0.75
