"""The scripted Bedrock endpoint: its AWS event-stream frames as botocore reads them, and its
check of a request's SigV4 signature (against one pi 0.73.1 really signed) or bearer token."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer

from tempi.testing.scripted_llm.aws_eventstream import encode_frame
from tempi.testing.scripted_llm.bedrock_auth import check_request
from tempi.testing.scripted_llm.bedrock_converse import BedrockConverseWire
from tempi.testing.scripted_llm.scenario import ScriptedToolCall, ScriptedTurn
from tests.fixture_paths import PI_FIXTURES


def _decode(data: bytes) -> list[tuple[dict[str, Any], bytes]]:
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    return [(message.headers, message.payload) for message in buffer]


def test_frames_decode_with_botocore_and_a_flipped_byte_fails_the_crc() -> None:
    frame = encode_frame({":event-type": "messageStart", ":message-type": "event"}, b'{"role":"assistant"}')
    [(headers, payload)] = _decode(frame)
    assert headers == {":event-type": "messageStart", ":message-type": "event"}
    assert json.loads(payload) == {"role": "assistant"}

    corrupted = bytearray(frame)
    corrupted[-6] ^= 0x01  # inside the payload: only the message CRC can notice
    with pytest.raises(ChecksumMismatch):
        _decode(bytes(corrupted))


def test_a_scripted_turn_streams_bedrock_events_in_order() -> None:
    turn = ScriptedTurn(
        thinking="Think.",
        text="Answer.",
        tool_calls=[ScriptedToolCall(name="read", arguments={"path": "a"}, id="tooluse_1")],
        chunk_size=4,
    )
    data = b"".join(frame.encode() for frame in BedrockConverseWire().stream(turn, {}))
    events = [(h[":event-type"], json.loads(p)) for h, p in _decode(data)]
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "messageStart" and kinds[-2:] == ["messageStop", "metadata"]
    assert kinds.count("contentBlockStart") == 1  # only the tool use has one, as on Bedrock
    deltas = [e["delta"] for kind, e in events if kind == "contentBlockDelta"]
    assert (
        "".join(d["reasoningContent"].get("text", "") for d in deltas if "reasoningContent" in d) == "Think."
    )
    assert any(d.get("reasoningContent", {}).get("signature") for d in deltas)
    assert "".join(d["text"] for d in deltas if "text" in d) == "Answer."
    assert json.loads("".join(d["toolUse"]["input"] for d in deltas if "toolUse" in d)) == {"path": "a"}
    assert events[-2][1]["stopReason"] == "tool_use"
    assert set(events[-1][1]["usage"]) >= {"inputTokens", "outputTokens", "cacheReadInputTokens"}


def test_an_exception_frame_ends_the_stream() -> None:
    turn = ScriptedTurn(text="partial", stream_exception="modelStreamErrorException")
    [*_, (headers, payload)] = _decode(b"".join(f.encode() for f in BedrockConverseWire().stream(turn, {})))
    assert headers[":message-type"] == "exception"
    assert headers[":exception-type"] == "modelStreamErrorException"
    assert "Retry your request" in json.loads(payload)["message"]


def _pi_request() -> tuple[str, dict[str, str], bytes]:
    recorded = json.loads((PI_FIXTURES / "llm-requests" / "bedrock-converse-stream.json").read_text())
    headers: dict[str, str] = recorded["headers"]
    # The AWS SDK sends JSON.stringify's output; this is the same text.
    body = json.dumps(recorded["body"], separators=(",", ":"), ensure_ascii=False).encode()
    assert len(body) == int(headers["content-length"])
    return f"http://{headers['host']}{recorded['path']}", headers, body


def test_pis_signed_request_passes_and_any_change_to_it_is_refused() -> None:
    url, headers, body = _pi_request()
    assert check_request("POST", url, headers, body) is None

    refusal = check_request("POST", url.replace("%3A", ":"), headers, body)
    assert refusal is not None and refusal.error_type == "InvalidSignatureException"
    refusal = check_request("POST", url, {**headers, "x-amz-date": "20260101T000000Z"}, body)
    assert refusal is not None and refusal.error_type == "InvalidSignatureException"
    refusal = check_request("POST", url, headers, body.replace(b"hello", b"HELLO"))
    assert refusal is not None and refusal.error_type == "XAmzContentSHA256Mismatch"
    unsigned = {k: v for k, v in headers.items() if k != "authorization"}
    refusal = check_request("POST", url, unsigned, body)
    assert refusal is not None and refusal.status == 403
    other_service = headers["authorization"].replace("/bedrock/", "/s3/")
    refusal = check_request("POST", url, {**headers, "authorization": other_service}, body)
    assert refusal is not None and refusal.error_type == "IncompleteSignatureException"


def test_a_bearer_token_is_accepted() -> None:
    recorded = json.loads((PI_FIXTURES / "llm-requests" / "bedrock-converse-stream-bearer.json").read_text())
    assert recorded["headers"]["authorization"] == "Bearer scripted-bedrock-api-key"
    assert check_request("POST", "http://h/model/m/converse-stream", recorded["headers"], b"{}") is None
