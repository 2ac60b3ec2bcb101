"""What the server records of each request: what was asked, what answered it, and when."""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, Field

from tempi.testing.scripted_llm.wire import ApiName

logger = logging.getLogger("tempi.testing.scripted_llm")


class RecordedRequest(BaseModel):
    """One request as the server saw it, with the turn it chose and the HTTP status it served."""

    path: str
    query_string: str = ""
    raw_path: str = ""  # as sent, percent-escapes kept (Bedrock's `%3A` in a model id)
    api: ApiName
    scenario: str
    headers: dict[str, str]
    body: dict[str, Any]
    query: dict[str, str] = Field(default_factory=dict)
    turn_index: int | None = None
    route: str | None = None  # the scenario's route that answered it
    kind: Literal["turn", "summary"] = "turn"
    status: int = 0
    # Wall clock (time.time()): when the request reached the handler, and when the last byte
    # of its answer was handed to the socket. A client's time from one answer's end to its
    # next request is its own per-turn overhead (bench/turn_gaps.py).
    received_at: float = 0.0
    answered_at: float | None = None


def record_of(request: web.Request, api: ApiName, received_at: float) -> RecordedRequest:
    """The record of a request just received; its body is filled in once it parses."""
    return RecordedRequest(
        path=request.path,
        query_string=request.query_string,
        raw_path=request.raw_path,
        api=api,
        scenario=request.match_info["scenario"],
        # Lower-cased names: HTTP header names are case-insensitive, dict keys are not.
        headers={key.lower(): value for key, value in request.headers.items()},
        body={},
        query=dict(request.query),
        received_at=received_at,
    )


class RequestLog:
    """The requests served so far, in memory and, with a `record_path`, as JSON lines."""

    def __init__(self, record_path: Path | None = None) -> None:
        self._record_path = record_path
        self._requests: list[RecordedRequest] = []

    @property
    def requests(self) -> list[RecordedRequest]:
        return list(self._requests)

    def requests_for(self, scenario: str) -> list[RecordedRequest]:
        return [request for request in self._requests if request.scenario == scenario]

    def add(self, record: RecordedRequest) -> None:
        self._requests.append(record)
        if record.kind == "summary":
            where = "summary"
        else:
            where = "no turn" if record.turn_index is None else f"turn {record.turn_index}"
        logger.info("%s %s [%s] %s -> %d", record.api, record.scenario, where, record.path, record.status)

    async def finish(
        self, request: web.Request, record: RecordedRequest, response: web.StreamResponse
    ) -> None:
        """Send an answer not sent yet (a JSON one), stamp when it ended, then write the record
        out, so that a recording holds each request's whole timing."""
        transport = request.transport
        if not response.prepared and transport is not None and not transport.is_closing():
            with contextlib.suppress(ConnectionError):
                await response.prepare(request)
                await response.write_eof()
        record.answered_at = time.time()
        if self._record_path is not None:
            with self._record_path.open("a", encoding="utf-8") as sink:
                sink.write(record.model_dump_json() + "\n")
