"""AWS event-stream frames (`application/vnd.amazon.eventstream`), as Bedrock streams them.

A frame is: total length and headers length (4 bytes each, big-endian), a CRC32 of those
eight bytes, the headers, the payload, and a CRC32 of everything before it. Each header is a
one-byte name length, the name, a type byte (7 = string), a two-byte value length and the
value. Only string headers are needed for Bedrock's events and exceptions.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from typing import Any

CONTENT_TYPE = "application/vnd.amazon.eventstream"
_STRING = 7


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return (
        bytes([len(raw_name)]) + raw_name + bytes([_STRING]) + struct.pack(">H", len(raw_value)) + raw_value
    )


def encode_frame(headers: dict[str, str], payload: bytes) -> bytes:
    encoded_headers = b"".join(_header(name, value) for name, value in headers.items())
    prelude = struct.pack(">II", 12 + len(encoded_headers) + len(payload) + 4, len(encoded_headers))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + encoded_headers + payload
    return message + struct.pack(">I", zlib.crc32(message))


@dataclass(frozen=True)
class EventFrame:
    """One Bedrock event (`messageStart`, `contentBlockDelta`, …) or exception frame."""

    kind: str
    payload: dict[str, Any]
    exception: bool = False

    def encode(self) -> bytes:
        headers = (
            {":exception-type": self.kind, ":content-type": "application/json", ":message-type": "exception"}
            if self.exception
            else {":event-type": self.kind, ":content-type": "application/json", ":message-type": "event"}
        )
        return encode_frame(headers, json.dumps(self.payload, separators=(",", ":")).encode())
