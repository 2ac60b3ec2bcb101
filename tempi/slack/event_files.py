"""mom's event files (`<dir>/events/*.json`) read into what Temporal needs to wake the bot."""

from __future__ import annotations

import datetime
import hashlib
import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

# mom's event files are a line or two; a bigger one is not an event file.
MAX_EVENT_FILE_BYTES = 64 * 1024


class _EventFile(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    # A Slack id: the channel's folder holds the conversation's files, so `../x` is refused.
    channel_id: str = Field(alias="channelId", pattern=r"^[A-Z0-9]{1,64}$")
    text: str


class ImmediateEvent(_EventFile):
    type: Literal["immediate"]


class OneShotEvent(_EventFile):
    type: Literal["one-shot"]
    at: str

    @field_validator("at")
    @classmethod
    def _iso(cls, value: str) -> str:
        datetime.datetime.fromisoformat(value)
        return value

    def when(self) -> datetime.datetime:
        # A time without an offset is the gateway's local time, as JavaScript's Date reads it.
        at = datetime.datetime.fromisoformat(self.at)
        return at if at.tzinfo else at.astimezone()


class PeriodicEvent(_EventFile):
    type: Literal["periodic"]
    schedule: str = Field(min_length=1)
    timezone: str = "UTC"

    def temporal_cron(self) -> str:
        """mom's cron (croner: 5 fields, or 6 with seconds first) as Temporal reads it (7 fields
        have seconds first; 6 would mean a trailing year)."""
        fields = self.schedule.split()
        return " ".join([*fields, "*"]) if len(fields) == 6 else self.schedule


EventFile = Annotated[ImmediateEvent | OneShotEvent | PeriodicEvent, Field(discriminator="type")]
_ADAPTER: TypeAdapter[ImmediateEvent | OneShotEvent | PeriodicEvent] = TypeAdapter(EventFile)


class BadEventFile(ValueError):
    pass


def parse_event_file(raw: bytes) -> ImmediateEvent | OneShotEvent | PeriodicEvent:
    if len(raw) > MAX_EVENT_FILE_BYTES:
        raise BadEventFile(f"it has {len(raw)} bytes, more than an event file's {MAX_EVENT_FILE_BYTES}")
    try:
        return _ADAPTER.validate_python(json.loads(raw))
    except RecursionError as err:
        raise BadEventFile("its JSON is nested too deeply") from err
    except (ValueError, ValidationError) as err:
        raise BadEventFile(
            f"{str(err)[:500]}. An event file is JSON with channelId, text and type immediate, "
            '"one-shot" (with "at", an ISO time) or periodic (with "schedule", a cron, and "timezone"); '
            "channelId is a Slack channel id such as C0123ABCD."
        ) from err


def digest_of(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:16]


def event_detail(event: ImmediateEvent | OneShotEvent | PeriodicEvent) -> str:
    """The third field of mom's `[EVENT:file:type:detail]` prefix."""
    if isinstance(event, OneShotEvent):
        return event.at
    if isinstance(event, PeriodicEvent):
        return event.schedule
    return "immediate"


def event_prompt(file: str, kind: str, detail: str, text: str) -> str:
    return f"[EVENT:{file}:{kind}:{detail}] {text}"
