"""`tempi pipeline` through the real executable: the dry run, the schema and the help."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator

from tempi.pipeline.loading import load_spec
from tempi.pipeline.targets import pipeline_id
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, scripted_home, tempi_env
from tests.pipeline_repo import MODULES, git, make_repo

EXAMPLE = Path(__file__).parent.parent / "examples/pipeline/migrate-old-api.yaml"


def _repo_state(repo: Path) -> tuple[str, str, str, str]:
    return (
        git(repo, "status", "--porcelain", "--untracked-files=all", "--ignored"),
        git(repo, "for-each-ref"),
        git(repo, "worktree", "list", "--porcelain"),
        git(repo, "stash", "list"),
    )


def test_dry_run_shows_the_shards_and_asks_no_model(
    tmp_path: Path, scripted_server: ScriptedLLMServer
) -> None:
    home = scripted_home(tmp_path, scripted_server, "pipeline-dry-run", [{"text": "should never be asked"}])
    repo = make_repo(tmp_path / "repo")
    spec_path = repo / "pipeline.yaml"
    spec_path.write_text(EXAMPLE.read_text().replace("anthropic/claude-sonnet-4-5:medium", "mock/mock-model"))
    before = _repo_state(repo)

    proc = run_tempi(
        ["pipeline", "run", "pipeline.yaml", "--dry-run", "--concurrency", "2"],
        cwd=repo,
        env=tempi_env(home, None),
    )

    assert proc.returncode == 0, proc.stderr
    main = git(repo, "rev-parse", "main").strip()
    out = proc.stdout
    assert f"base         main = {main}" in out
    assert f"pipeline id  {pipeline_id(load_spec(spec_path), main)}" in out
    assert "model        mock/mock-model" in out
    assert "shards       6 (by file, at most 1 per shard), 2 at a time" in out
    # What else the spec decides, so a reviewer sees it before a run spends anything.
    assert "final        verify python -m pytest -q, commits per-shard\n" in out
    assert "budget       max $50, 80 turns a shard, deadline 6h\n" in out
    assert "context      Shared instructions for every shard\n" in out
    for i, module in enumerate(MODULES, start=1):
        assert f"shard {i}/6 " in out and f": {module}\n" in out
        assert f"  migrate: Migrate {module} from old_api to new_api.\n" in out
    # Not a target: the checked-out branch's own module, the uncommitted draft, vendored code.
    for other in ("src/app/later.py", "src/app/draft.py", "src/vendor/six.py"):
        assert other not in out
    assert scripted_server.requests_for("pipeline-dry-run") == []
    assert _repo_state(repo) == before

    # Again, as JSON: the same id (so a rerun resumes the same pipeline) and the same shards.
    again = run_tempi(
        ["pipeline", "run", "pipeline.yaml", "--dry-run", "--mode", "json"],
        cwd=repo,
        env=tempi_env(home, None),
    )
    assert again.returncode == 0, again.stderr
    plan = json.loads(again.stdout)
    assert f"pipeline id  {plan['pipeline_id']}\n" in out
    assert [s["shard"]["files"] for s in plan["shards"]] == [[m] for m in MODULES]
    assert plan["shards"][0]["first_prompt"] == f"Migrate {MODULES[0]} from old_api to new_api."
    assert scripted_server.requests_for("pipeline-dry-run") == []
    assert _repo_state(repo) == before


def test_spec_errors_exit_2_and_a_missing_key_3_with_the_reason(tmp_path: Path) -> None:
    home = tmp_path / "home"
    repo = make_repo(tmp_path / "repo")
    bad = repo / "bad.yaml"
    bad.write_text(EXAMPLE.read_text().replace("max_turns: 40", "max_turns: -1"))
    proc = run_tempi(["pipeline", "run", "bad.yaml", "--dry-run"], cwd=repo, env=tempi_env(home, None))
    assert proc.returncode == 2
    assert "tempi pipeline: bad.yaml: steps[0].max_turns: must be a positive integer" in proc.stderr

    wrong_base = repo / "base.yaml"
    wrong_base.write_text(EXAMPLE.read_text().replace("base: main", "base: mian"))
    proc = run_tempi(["pipeline", "run", "base.yaml", "--dry-run"], cwd=repo, env=tempi_env(home, None))
    assert proc.returncode == 2
    assert "repo.base: 'mian' is not a commit" in proc.stderr

    shutil.copy(EXAMPLE, repo / "ok.yaml")
    proc = run_tempi(["pipeline", "run", "ok.yaml"], cwd=repo, env=tempi_env(home, None))
    assert proc.returncode == 3, proc.stderr
    assert "no API key for the model (anthropic/claude-sonnet-4-5" in proc.stderr
    assert not (home / "run").exists()  # no server was started for a run that cannot go

    proc = run_tempi(["pipeline", "status"], cwd=repo, env=tempi_env(home, None))
    assert proc.returncode == 2 and "the following arguments are required: ID" in proc.stderr


def test_help_lists_the_commands_and_the_run_flags(tmp_path: Path) -> None:
    env = tempi_env(tmp_path / "home", None)
    top = run_tempi(["pipeline", "--help"], cwd=tmp_path, env=env)
    assert top.returncode == 0
    for command in ("run", "schema", "status", "attach", "wait", "cancel", "list"):
        assert f"    {command} " in top.stdout
    assert "exit codes: 0 all shards committed" in top.stdout
    run = run_tempi(["pipeline", "run", "--help"], cwd=tmp_path, env=env)
    for flag in ("--dry-run", "--detach", "--fresh", "--concurrency N", "--json FILE", "--junit FILE"):
        assert flag in run.stdout


def test_the_schema_validates_the_example_spec(tmp_path: Path) -> None:
    proc = run_tempi(["pipeline", "schema"], cwd=tmp_path, env=tempi_env(tmp_path / "home", None))
    assert proc.returncode == 0, proc.stderr
    schema = json.loads(proc.stdout)
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    example = yaml.safe_load(EXAMPLE.read_text())
    assert list(validator.iter_errors(example)) == []
    # What the loader refuses, the schema refuses too (editors show it while typing).
    for broken in (
        {**example, "colour": "red"},
        {**example, "targets": {"glob": "a", "command": "b"}},
        {**example, "targets": {"group_by": "file"}},
        {**example, "verify": {**example["verify"], "timeout": "10 minutes"}},
        {**example, "steps": []},
    ):
        assert list(validator.iter_errors(broken)) != [], broken
