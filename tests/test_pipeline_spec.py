"""The pipeline spec: defaults, and errors that name the file, the key and what to write."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tempi.pipeline.loading import SpecError, load_spec, parse_spec
from tempi.pipeline.spec import PipelineSpec
from tempi.pipeline.values import split_model_ref

EXAMPLE = Path(__file__).parent.parent / "examples/pipeline/migrate-old-api.yaml"
MINIMAL = "version: 1\nname: t\ntargets: {glob: '**/*.py'}\nsteps: [{name: s, prompt: go}]\n"


def _errors(text: str) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_spec(text, "spec.yaml")
    return caught.value.problems


def test_the_example_spec_loads_with_every_field() -> None:
    spec = load_spec(EXAMPLE)
    assert spec.name == "migrate-old-api"
    assert (spec.repo.path, spec.repo.base) == (".", "main")
    assert spec.model == "anthropic/claude-sonnet-4-5:medium"
    assert spec.setup == ["uv sync --frozen"]
    assert spec.targets.globs == ["src/**/*.py"] and spec.targets.exclude == ["src/vendor/**"]
    assert spec.steps[0].max_turns == 40
    assert spec.verify is not None and spec.verify.timeout == 600
    assert spec.verify.repair is not None and spec.verify.repair.attempts == 2
    assert "{{verify.tail}}" in spec.verify.repair.prompt
    assert spec.budget.max_cost_usd == 50 and spec.budget.deadline == 6 * 3600
    assert spec.final.commits == "per-shard" and spec.final.verify == "python -m pytest -q"
    assert spec.output.patch == "out/pipeline.patch"
    assert spec.report.json_path == "out/summary.json" and spec.report.junit == "out/junit.xml"


def test_a_minimal_spec_gets_the_defaults() -> None:
    spec = parse_spec(MINIMAL, "spec.yaml")
    assert (spec.repo.path, spec.repo.base, spec.sandbox, spec.model) == (".", "HEAD", "local", None)
    assert spec.branch == "tempi/t"
    assert spec.targets.shard_size == 1 and spec.targets.group_by == "file"
    assert spec.concurrency == 4 and spec.on_shard_failure == "continue"
    assert spec.verify is None and spec.final.commits == "per-shard"
    by_dir = parse_spec(MINIMAL.replace("'**/*.py'", "'**/*.py', group_by: directory"), "spec.yaml")
    assert by_dir.targets.shard_size is None  # a whole directory


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            "steps: [{name: s, prompt: go, max_turns: -3}]",
            "spec.yaml: steps[0].max_turns: must be a positive integer",
        ),
        ("steps: [{name: s, prompt: go, max_turns: yes}]", "steps[0].max_turns: must be a positive integer"),
        (
            "steps: [{name: s, prompt: go, max_turn: 4}]",
            "steps[0].max_turn: unknown key; did you mean max_turns?",
        ),
        ("steps: []", "steps: needs at least one step"),
        (
            "steps: [{name: s, prompt: 'do {{shard.file}}'}]",
            "steps[0].prompt: unknown placeholder {{shard.file}}; use one of {{shard.files}}",
        ),
        ("steps: [{name: s, prompt: a}, {name: s, prompt: b}]", "steps: two steps are named s"),
        ("targets: {glob: a, command: b}", "targets: give either glob"),
        ("targets: {group_by: file}", "targets: give either glob"),
        ("targets: {glob: a, group_by: dir}", "targets.group_by: must be 'file' or 'directory' (got 'dir')"),
        ("targets: {glob: a, max_per_shard: 0}", "targets.max_per_shard: must be a positive integer"),
        ("targets: {command: a, exclude: [b]}", "targets: exclude goes with glob"),
        (
            "verify: {command: t, timeout: 10 minutes}",
            "verify.timeout: must be a duration such as 90s, 10m, 6h",
        ),
        (
            "verify: {command: t, repair: {prompt: '{{verify.tale}}'}}",
            "verify.repair.prompt: unknown placeholder {{verify.tale}}",
        ),
        ("model: claude-sonnet", "model: must be provider/id with an optional :thinking level"),
        ("sandbox: podman", "sandbox: must be local, bwrap, docker or docker:IMAGE"),
        ("sandbox: 'local:x'", "sandbox: must be local, bwrap, docker or docker:IMAGE"),
        ("budget: {max_cost_usd: lots}", "budget.max_cost_usd: must be a positive number"),
        ("on_shard_failure: ignore", "on_shard_failure: must be 'continue' or 'stop'"),
        ("final: {commits: one}", "final.commits: must be 'per-shard' or 'squash'"),
        ("output: {branch: 'a..b'}", "output.branch: must be a git branch name"),
        ("report: {xml: x}", "report.xml: unknown key; keys here: json, junit, markdown"),
        ("repo: main", "repo: must be a mapping of keys"),
        ("setup: uv sync", "setup: must be a list"),
        ("name: my pipeline", "name: must be 1 to 63 letters, digits"),
        ("version: 2", "version: must be 1 (got 2)"),
        ("colour: red", "colour: unknown key; keys here: version, name, repo"),
    ],
)
def test_a_bad_key_is_named_with_what_to_write(change: str, expected: str) -> None:
    data = yaml.safe_load(MINIMAL)
    data.update(yaml.safe_load(change))
    problems = _errors(yaml.safe_dump(data))
    assert any(expected in p for p in problems), problems
    assert all(p.startswith("spec.yaml: ") for p in problems)


def test_missing_required_keys_are_each_named() -> None:
    problems = _errors("name: t\n")
    assert "spec.yaml: version: missing; this key is required" in problems
    assert "spec.yaml: targets: missing; this key is required" in problems
    assert "spec.yaml: steps: missing; this key is required" in problems


def test_broken_yaml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("version: 1\nsteps: [\n  {name: a\n")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert caught.value.problems[0].startswith(f"{path}: line ")
    assert "not valid YAML" in caught.value.problems[0]
    assert _errors("- a\n- b\n") == [
        "spec.yaml: a spec is a mapping of keys (version: 1, name: ..., targets: ..., steps: ...)"
    ]
    with pytest.raises(SpecError, match="no such file"):
        load_spec(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("10m", 600), ("6h", 21600), ("1h30m", 5400), ("1d", 86400), (45, 45)]
)
def test_durations(text: str | int, seconds: int) -> None:
    spec = parse_spec(MINIMAL + f"verify: {{command: t, timeout: {text}}}\n", "spec.yaml")
    assert spec.verify is not None and spec.verify.timeout == seconds


def test_model_references_keep_colons_that_are_not_thinking_levels() -> None:
    assert split_model_ref("anthropic/claude-sonnet-4-5:medium") == (
        "anthropic",
        "claude-sonnet-4-5",
        "medium",
    )
    assert split_model_ref("ollama/llama3:8b") == ("ollama", "llama3:8b", None)
    assert split_model_ref("openrouter/openai/gpt-5:high") == ("openrouter", "openai/gpt-5", "high")
    assert parse_spec(MINIMAL + "model: ollama/llama3:8b\n", "s").model == "ollama/llama3:8b"


def test_docker_sandboxes_may_name_an_image() -> None:
    for sandbox in ("docker", "docker:python:3.12-slim", "bwrap", "local"):
        assert parse_spec(MINIMAL + f"sandbox: '{sandbox}'\n", "s").sandbox == sandbox


def test_the_schema_is_published_by_the_model() -> None:
    assert PipelineSpec.model_json_schema()["additionalProperties"] is False
