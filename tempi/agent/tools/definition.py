"""What a tool is, as data: the spec sent to the model and the effect a call has.

The effect is declared rather than inferred from arguments so the workflow can choose a
retry policy and an ordering from the tool name alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, model_validator

from tempi.agent.llm_context import ToolSpec
from tempi.agent.truncation import DEFAULT_MAX_BYTES

# reads: never changes the workspace, so it may run in parallel and be retried freely.
# writes: changes the one file named by `path_argument`; a retry is safe because the
#   edit journal recognises a call it already applied and a write rewrites the same content.
# executes: may do anything (a command ran); running it twice could do it twice.
ToolEffect = Literal["reads", "writes", "executes"]

MAX_KB = DEFAULT_MAX_BYTES // 1024


def _unchanged(args: Any) -> Any:
    return args


class ToolDefinition(BaseModel):
    model_config = ConfigDict(frozen=True)

    spec: ToolSpec
    effect: ToolEffect
    # For `writes`: the argument naming the file changed, so calls on one file keep their order.
    path_argument: str | None = None
    # Runs before validation, to accept argument shapes models still send for older versions.
    prepare_args: Callable[[Any], Any] = _unchanged

    @property
    def name(self) -> str:
        return self.spec.name

    @model_validator(mode="after")
    def _path_argument_matches_effect(self) -> Self:
        if (self.effect == "writes") != (self.path_argument is not None):
            raise ValueError(f"{self.name}: a path_argument is declared exactly for tools that write")
        if self.path_argument is not None and self.path_argument not in self.spec.parameters["properties"]:
            raise ValueError(f"{self.name}: path_argument {self.path_argument!r} is not a parameter")
        return self


def string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def number(description: str) -> dict[str, Any]:
    return {"type": "number", "description": description}


def boolean(description: str) -> dict[str, Any]:
    return {"type": "boolean", "description": description}


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}
