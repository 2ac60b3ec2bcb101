"""Shared pydantic base for everything that crosses a process or history boundary.

pi's JSON uses camelCase; Python code uses snake_case. Unknown fields are kept so a
file written by a newer pi survives a round trip through tempi untouched.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class PiModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        ser_json_inf_nan="constants",
        defer_build=True,
    )

    def to_json_dict(self) -> dict[str, Any]:
        """The exact JSON object pi would write: camelCase, absent optionals omitted."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_none=True)
