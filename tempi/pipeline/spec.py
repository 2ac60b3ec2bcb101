"""The pipeline spec: what `tempi pipeline run SPEC.yaml` reads, as pydantic models.

Unknown keys are errors everywhere, so a misspelt `max_turn` is said instead of ignored.
`tempi pipeline schema` publishes the JSON Schema of `PipelineSpec`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from tempi.pipeline.prompts import SHARD_PLACEHOLDERS, VERIFY_PLACEHOLDERS, unknown_placeholders
from tempi.pipeline.values import (
    BranchName,
    Duration,
    ModelRef,
    Name,
    NonNegativeInt,
    PositiveInt,
    PositiveNumber,
    SandboxRef,
    Text,
)

DEFAULT_REPAIR_PROMPT = "Verification failed:\n{{verify.tail}}\nFix it."


class SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class RepoSpec(SpecModel):
    path: str = Field(
        default=".",
        description="the git repository, relative to the directory `tempi pipeline run` runs in; "
        "target globs are relative to its top directory",
    )
    base: Text = Field(
        default="HEAD",
        description="branch, tag or commit the shards start from; resolved to a commit once and recorded",
    )


class TargetsSpec(SpecModel):
    """Either `glob` (files at the base commit) or `command` (one target per line)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"oneOf": [{"required": ["glob"]}, {"required": ["command"]}]},
    )

    glob: Text | list[Text] | None = Field(
        default=None,
        description="files at the base commit to work on; `**` matches any number of directories",
    )
    exclude: list[Text] = Field(
        default_factory=list, description="globs of files (or whole directories) to leave out"
    )
    command: Text | None = Field(
        default=None, description="a shell command run in the repository that prints one target per line"
    )
    group_by: Literal["file", "directory"] = Field(
        default="file",
        description="file: shards of files in order; directory: a shard never spans two directories",
    )
    max_per_shard: PositiveInt | None = Field(
        default=None,
        description="targets per shard at most (default: 1 by file, the whole directory by directory)",
    )

    @model_validator(mode="after")
    def _one_source(self) -> TargetsSpec:
        if (self.glob is None) == (self.command is None):
            raise PydanticCustomError(
                "targets_source",
                'give either glob (e.g. glob: "src/**/*.py") or command (e.g. command: "git grep -l old_api"), '
                "not both and not neither",
            )
        if self.command is not None and self.exclude:
            raise PydanticCustomError(
                "targets_exclude", "exclude goes with glob; a command prints only the targets it wants"
            )
        return self

    @property
    def globs(self) -> list[str]:
        if self.glob is None:
            return []
        return [self.glob] if isinstance(self.glob, str) else list(self.glob)

    @property
    def shard_size(self) -> int | None:
        """Targets per shard; None is no limit (a whole directory)."""
        if self.max_per_shard is not None:
            return self.max_per_shard
        return 1 if self.group_by == "file" else None


def _check_placeholders(template: str, known: dict[str, str]) -> str:
    bad = unknown_placeholders(template, known)
    if bad:
        raise PydanticCustomError(
            "placeholder",
            "unknown placeholder {bad}; use one of {usable}",
            {
                "bad": ", ".join("{{" + n + "}}" for n in bad),
                "usable": ", ".join("{{" + n + "}}" for n in known),
            },
        )
    return template


class StepSpec(SpecModel):
    name: Name
    prompt: Text = Field(
        description="sent to the shard's session; {{shard.files}} and the like are filled in"
    )
    max_turns: PositiveInt | None = Field(default=None, description="model turns this step may take at most")

    @field_validator("prompt")
    @classmethod
    def _placeholders(cls, prompt: str) -> str:
        return _check_placeholders(prompt, SHARD_PLACEHOLDERS)


class RepairSpec(SpecModel):
    attempts: NonNegativeInt = Field(default=2, description="repair prompts after a failed verify, at most")
    prompt: Text = Field(
        default=DEFAULT_REPAIR_PROMPT,
        description="continues the shard's session; {{verify.tail}} is the output",
    )

    @field_validator("prompt")
    @classmethod
    def _placeholders(cls, prompt: str) -> str:
        return _check_placeholders(prompt, SHARD_PLACEHOLDERS | VERIFY_PLACEHOLDERS)


class VerifySpec(SpecModel):
    command: Text = Field(description="a shell command in the shard's checkout; exit 0 means verified")
    timeout: Duration = Field(default=600, description="how long the command may run")
    repair: RepairSpec | None = Field(
        default=None, description="what to do when the command fails (default: the shard fails)"
    )


class BudgetSpec(SpecModel):
    max_cost_usd: PositiveNumber | None = Field(
        default=None, description="no new shard starts once the pipeline has cost this much over all its runs"
    )
    max_turns_per_shard: PositiveInt | None = Field(
        default=None, description="a shard past this many turns stops"
    )
    deadline: Duration | None = Field(
        default=None, description="no new shard starts this long after a run began"
    )


class FinalSpec(SpecModel):
    verify: Text | None = Field(
        default=None, description="a shell command run on the output branch after the last shard"
    )
    commits: Literal["per-shard", "squash"] = Field(
        default="per-shard", description="one commit per shard, or one in all"
    )


class OutputSpec(SpecModel):
    branch: BranchName | None = Field(
        default=None, description="the branch the shards' commits go on (default tempi/NAME)"
    )
    patch: str | None = Field(default=None, description="also write the whole change as a patch file here")


class ReportSpec(SpecModel):
    json_path: str | None = Field(default=None, alias="json", description="a JSON summary")
    junit: str | None = Field(default=None, description="JUnit XML, one testcase per shard")
    markdown: str | None = Field(
        default=None, description="a Markdown summary (e.g. for $GITHUB_STEP_SUMMARY)"
    )


class PipelineSpec(SpecModel):
    """A refactor run shard by shard over a repository."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, title="tempi pipeline spec")

    version: Literal[1] = Field(description="the spec format; write `version: 1`")
    name: Name = Field(description="names the pipeline, its id and its default branch")
    repo: RepoSpec = Field(default_factory=RepoSpec)
    model: ModelRef | None = Field(
        default=None, description="default: tempi's default model (settings, then a key)"
    )
    sandbox: SandboxRef = "local"
    setup: list[Text] = Field(
        default_factory=list, description="shell commands run once per base commit, before the shards"
    )
    context: str = Field(default="", description="shared instructions every shard's session gets")
    extensions: list[Text] = Field(
        default_factory=list,
        description="Python extension modules (paths from the repository) every shard's session "
        "loads, besides those in .tempi/extensions/",
    )
    trust_project: bool = Field(
        default=False,
        description="use the repository's own .tempi/ (its extensions, MCP servers, sessionDir and shell "
        "settings) as it is at the base commit; without it every shard leaves them out",
    )
    targets: TargetsSpec
    steps: list[StepSpec] = Field(min_length=1, description="prompts sent in order to each shard's session")
    verify: VerifySpec | None = None
    concurrency: PositiveInt = Field(default=4, description="shards at work at once")
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    on_shard_failure: Literal["continue", "stop"] = "continue"
    final: FinalSpec = Field(default_factory=FinalSpec)
    output: OutputSpec = Field(default_factory=OutputSpec)
    report: ReportSpec = Field(default_factory=ReportSpec)

    @field_validator("steps")
    @classmethod
    def _distinct_names(cls, steps: list[StepSpec]) -> list[StepSpec]:
        seen: set[str] = set()
        for step in steps:
            if step.name in seen:
                raise PydanticCustomError(
                    "step_names",
                    "two steps are named {name}; give each step its own name",
                    {"name": step.name},
                )
            seen.add(step.name)
        return steps

    @property
    def branch(self) -> str:
        return self.output.branch or f"tempi/{self.name}"


# Knobs a rerun may change and still resume the same pipeline (the issue's "a rerun with a
# larger budget finishes"): they say how to run the work, not what the work is.
RUN_KNOBS = frozenset({"concurrency", "budget", "on_shard_failure", "report"})


def work_definition(spec: PipelineSpec) -> dict[str, Any]:
    """The part of the spec that defines the work, for the pipeline's id."""
    work = spec.model_dump(mode="json", by_alias=True, exclude=set(RUN_KNOBS))
    # A spec written before these fields keeps its id.
    if not spec.extensions:
        del work["extensions"]
    if not spec.trust_project:
        del work["trust_project"]
    return work


def json_schema() -> dict[str, Any]:
    schema = PipelineSpec.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema
