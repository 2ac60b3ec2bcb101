"""The CI templates in deploy/ci/ run here as their CI would run them: the GitLab job's
`script:` through the runner's own shell wrapper, the GitHub Actions job's steps in order with
its expressions, outputs and `if:` conditions. The remote is a local bare repository; only
what cannot run on this machine is stood in for: the image's package installs, `uv tool
install` (which puts this tree's `tempi` on PATH), the caches (a directory kept between
runs), the GitLab API (a local HTTP server the real curl talks to) and `gh` (a script that
records its calls). Pushes to the forge's https URL reach the bare repository through git's
own `url.<base>.insteadOf`."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from tempi.workers.service import process_alive
from tests.pipeline_repo import git

CI = Path(__file__).resolve().parents[1] / "deploy" / "ci"
JOB_TIMEOUT_S = 300

GITLAB_HOST = "gitlab.test"
GITLAB_PROJECT = "group/project"
GITLAB_TOKEN = "glpat-test-token"
GITHUB_URL = "https://github.com/owner/project.git"
GITHUB_TOKEN = "ghs-test-token"


def gitlab_job() -> dict[str, Any]:
    return yaml.safe_load((CI / "gitlab-ci.yml").read_text())["tempi-pipeline"]


def github_workflow() -> dict[Any, Any]:
    return yaml.safe_load((CI / "github-actions.yml").read_text())


@dataclass
class Remote:
    """A bare repository standing in for the forge's, and a developer's clone that pushes to it."""

    bare: Path
    dev: Path

    @classmethod
    def from_repo(cls, repo: Path, root: Path) -> Remote:
        bare = root / "remote.git"
        git(root, "init", "-q", "--bare", str(bare))
        git(repo, "push", "-q", str(bare), "main")
        dev = root / "developer"
        git(root, "clone", "-q", str(bare), str(dev))
        return cls(bare, dev)

    def rev(self, ref: str) -> str | None:
        proc = subprocess.run(
            ["git", "rev-parse", "-q", "--verify", f"{ref}^{{commit}}"],
            cwd=self.bare,
            capture_output=True,
            text=True,
        )
        return proc.stdout.strip() or None

    def push_commit(self, files: dict[str, str], message: str) -> str:
        """A developer's commit on main, pushed to the remote."""
        git(self.dev, "pull", "-q", "--ff-only")
        for name, content in files.items():
            (self.dev / name).write_text(content)
        git(self.dev, "add", "-A")
        git(self.dev, "commit", "-q", "-m", message)
        git(self.dev, "push", "-q", "origin", "main")
        return git(self.dev, "rev-parse", "HEAD").strip()


@dataclass
class MergeRequestAPI:
    """GitLab's merge request endpoints for one project, on 127.0.0.1: what the job asked
    (method, query or form, token) and the merge requests it opened."""

    project_id: str
    calls: list[dict[str, Any]] = field(default_factory=list)
    opened: list[dict[str, str]] = field(default_factory=list)
    url: str = ""

    @contextmanager
    def serving(self) -> Iterator[MergeRequestAPI]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _record(self, form: dict[str, list[str]]) -> bool:
                parts = urlsplit(self.path)
                api.calls.append(
                    {
                        "method": self.command,
                        "path": parts.path,
                        "params": {k: v[0] for k, v in form.items()},
                        "token": self.headers.get("PRIVATE-TOKEN"),
                    }
                )
                return parts.path == f"/api/v4/projects/{api.project_id}/merge_requests"

            def do_GET(self) -> None:
                query = parse_qs(urlsplit(self.path).query)
                if not self._record(query):
                    return self._answer(404, {"message": "404 Not Found"})
                state = query.get("state", [""])[0]
                source = query.get("source_branch", [""])[0]
                found = [mr for mr in api.opened if state == "opened" and mr["source_branch"] == source]
                self._answer(200, found)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = parse_qs(self.rfile.read(length).decode(), keep_blank_values=True)
                if not self._record(form):
                    return self._answer(404, {"message": "404 Not Found"})
                api.opened.append({k: v[0] for k, v in form.items()})
                self._answer(201, {"iid": len(api.opened), "state": "opened"})

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{server.server_address[1]}/api/v4"
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()


# `gh` as far as the workflow uses it: `pr view`, `pr create` and `pr edit`, on pull requests
# kept in a JSON file, each call recorded with its token and the repository it ran in.
GH_SHIM = """\
import json, os, subprocess, sys
from pathlib import Path

state_file = Path(os.environ["GH_SHIM_STATE"])
state = json.loads(state_file.read_text()) if state_file.exists() else {"calls": [], "prs": []}
args = sys.argv[1:]
origin = subprocess.run(["git", "config", "remote.origin.url"], capture_output=True, text=True).stdout.strip()
call = {"args": args, "token": os.environ.get("GH_TOKEN"), "origin": origin}
if "--body-file" in args:
    call["body"] = Path(args[args.index("--body-file") + 1]).read_text()
state["calls"].append(call)
code = 0
if args[:2] == ["pr", "view"]:
    if any(pr["head"] == args[2] for pr in state["prs"]):
        print("OPEN")
    else:
        print(f'no pull requests found for branch "{args[2]}"', file=sys.stderr)
        code = 1
elif args[:2] == ["pr", "create"]:
    state["prs"].append({"head": args[args.index("--head") + 1], "base": args[args.index("--base") + 1]})
elif args[:2] != ["pr", "edit"]:
    print(f"gh shim: {args} is not something the workflow should run", file=sys.stderr)
    code = 2
state_file.write_text(json.dumps(state))
sys.exit(code)
"""


def _write_exe(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def _shims(root: Path) -> Path:
    """The commands the jobs call that cannot run here. `uv tool install` puts this tree's
    `tempi` where uv puts a tool, $HOME/.local/bin, which is not on PATH until the job says so."""
    bin_dir = root / "shims"
    _write_exe(bin_dir / "apt-get", "#!/bin/sh\nexit 0\n")
    _write_exe(bin_dir / "sudo", "#!/bin/sh\nexit 0\n")
    tempi = f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m tempi "$@"\n'
    _write_exe(
        bin_dir / "uv",
        "#!/bin/sh\n"
        '[ "$1 $2" = "tool install" ] && [ -n "$3" ] || { echo "uv shim: $*" >&2; exit 2; }\n'
        'mkdir -p "$HOME/.local/bin"\n'
        f"cat > \"$HOME/.local/bin/tempi\" <<'EOF'\n{tempi}EOF\n"
        'chmod +x "$HOME/.local/bin/tempi"\n',
    )
    _write_exe(bin_dir / "gh", f"#!{sys.executable}\n{GH_SHIM}")
    return bin_dir


def _system_path() -> str:
    """PATH without any directory that already holds a `tempi` (this virtualenv's)."""
    dirs = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(d for d in dirs if d and not (Path(d) / "tempi").exists())


def _expand(value: str, variables: dict[str, str]) -> str:
    """GitLab's expansion of $NAME and ${NAME} in a job's variables."""
    return re.sub(r"\$\{?(\w+)\}?", lambda m: variables.get(m.group(1), ""), value)


@dataclass
class CIRig:
    """What both jobs share: the remote, the shims, the job's HOME, the run's state directory
    (TEMPI_WORK, overriding the template's fixed path), the cache kept between runs, and the
    environment a runner gives every job (the model's key and provider configuration)."""

    root: Path
    remote: Remote
    runner_env: dict[str, str]
    work: Path = field(init=False)
    caches: Path = field(init=False)
    home: Path = field(init=False)
    shims: Path = field(init=False)

    def __post_init__(self) -> None:
        self.work = self.root / "work"
        self.caches = self.root / "caches"  # an entry per cache key
        self.home = self.root / "job-home"
        self.shims = _shims(self.root)

    def base_env(self, forge_url: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("TEMPORAL_", "ANTHROPIC_", "OPENAI_", "TEMPI_", "GIT_", "PI_"))
        }
        env.update(self.runner_env)
        env["HOME"] = str(self.home)
        env["PATH"] = f"{self.shims}{os.pathsep}{_system_path()}"
        env["CI"] = "true"
        # Pushes to the forge go to the bare repository, by git's own URL rewriting.
        env["GIT_CONFIG_COUNT"] = "1"
        env["GIT_CONFIG_KEY_0"] = f"url.{self.remote.bare}.insteadOf"
        env["GIT_CONFIG_VALUE_0"] = forge_url
        return env

    def work_path(self, template_path: str, template_work: str) -> str:
        """A path of the template under its fixed TEMPI_WORK, moved under this rig's."""
        assert template_path == template_work or template_path.startswith(template_work + "/"), template_path
        return str(self.work) + template_path[len(template_work) :]

    def stop_leftover_server(self) -> None:
        """A job that died before its own `tempi server stop` leaves the server running: the
        test stops it (by the pid it recorded) wherever the state directory ended up."""
        homes = [
            self.work / "home",
            *self.caches.glob("*/*/home"),
            *self.root.glob("builds/*/*/.tempi-work/home"),
        ]
        for home in homes:
            info = home / "server.json"
            if info.exists():
                pid = json.loads(info.read_text())["pid"]
                if process_alive(pid):
                    os.kill(pid, 15)

    def server_left_running(self) -> bool:
        """Whether a service recorded in the cached state still runs."""
        infos = self.caches.glob("*/*/home/server.json")
        return any(process_alive(json.loads(info.read_text())["pid"]) for info in infos)


@dataclass
class JobRun:
    returncode: int
    log: str
    artifacts: list[str]  # the job's artifact paths that were there to upload


class GitLabRunner:
    """The GitLab job, each run on a fresh checkout of the remote's main with the cache
    (`.tempi-work/`) restored before the script and saved after it, whatever its outcome."""

    def __init__(self, rig: CIRig, api: MergeRequestAPI) -> None:
        self.rig = rig
        self.api = api
        self.job = gitlab_job()
        self.project = rig.root / "builds" / GITLAB_PROJECT

    def _checkout(self) -> str:
        """What the runner does: fetch the branches as origin's, then check the commit out
        detached (no local branch)."""
        if self.project.exists():
            shutil.rmtree(self.project)
        self.project.mkdir(parents=True)
        git(self.project, "init", "-q")
        git(self.project, "remote", "add", "origin", str(self.rig.remote.bare))
        git(self.project, "fetch", "-q", "origin", "+refs/heads/*:refs/remotes/origin/*")
        sha = git(self.project, "rev-parse", "origin/main").strip()
        git(self.project, "checkout", "-q", "-f", sha)
        return sha

    def _env(self, sha: str) -> dict[str, str]:
        env = self.rig.base_env(f"https://oauth2:{GITLAB_TOKEN}@{GITLAB_HOST}/{GITLAB_PROJECT}.git")
        predefined = {
            "GITLAB_CI": "true",
            "CI_PROJECT_DIR": str(self.project),
            "CI_SERVER_HOST": GITLAB_HOST,
            "CI_PROJECT_PATH": GITLAB_PROJECT,
            "CI_PROJECT_ID": self.api.project_id,
            "CI_API_V4_URL": self.api.url,
            "CI_COMMIT_REF_NAME": "main",
            "CI_COMMIT_REF_SLUG": "main",
            "CI_COMMIT_SHA": sha,
            "GITLAB_TOKEN": GITLAB_TOKEN,
        }
        env.update(predefined)
        variables = dict(self.job["variables"])
        fixed_work = variables["TEMPI_WORK"]
        for key, value in variables.items():
            value = _expand(str(value), {**env, **variables})
            if value.startswith(fixed_work):
                value = self.rig.work_path(value, fixed_work)
            env[key] = value
        return env

    def script(self) -> str:
        """The runner's script for the job: each `script:` entry echoed then run, all in one
        `eval` behind `: |` (so stdin is empty) with errexit and pipefail, as gitlab-runner's
        bash shell writes it."""
        body = "".join(
            f"echo {shlex.quote('$ ' + entry.splitlines()[0])}\n{entry}\n" for entry in self.job["script"]
        )
        return (
            "if set -o | grep pipefail > /dev/null; then set -o pipefail; fi; set -o errexit\n"
            "set +o noclobber\n"
            f": | eval {shlex.quote(body)}\n"
            "exit 0\n"
        )

    def run(self) -> JobRun:
        if self.rig.work.exists():  # a fresh container
            shutil.rmtree(self.rig.work)
        sha = self._checkout()
        env = self._env(sha)
        cache = self.job["cache"]
        entry = self.rig.caches / _expand(cache["key"], env)
        if entry.exists():
            for path in cache["paths"]:
                shutil.copytree(entry / path, self.project / path, symlinks=True)
        try:
            proc = subprocess.run(
                ["bash"],
                input=self.script(),
                cwd=self.project,
                env=env,
                capture_output=True,
                text=True,
                timeout=JOB_TIMEOUT_S,
            )
        finally:
            # Artifacts and cache are taken from the project directory after the script.
            artifacts = self.job["artifacts"]
            paths = [*artifacts["paths"], *artifacts["reports"].values()]
            kept = [p for p in paths if (self.project / p).is_file()]
            assert cache["when"] == "always"
            if entry.exists():
                shutil.rmtree(entry)
            entry.mkdir(parents=True)
            for path in cache["paths"]:
                if (self.project / path).exists():
                    shutil.move(self.project / path, entry / path)
        return JobRun(proc.returncode, proc.stdout + proc.stderr, kept)


def _github_expr(text: str, context: dict[str, Any], failed: bool) -> Any:
    """A GitHub Actions expression, as far as the workflow uses them: context lookups,
    string literals, ==, ||, && and the status functions."""

    def lookup(match: re.Match[str]) -> str:
        value: Any = context
        for part in match.group(0).split("."):
            value = value.get(part, "") if isinstance(value, dict) else ""
        return repr(value)

    py = re.sub(r"\b(?:inputs|github|secrets|steps)(?:\.[\w-]+)+", lookup, text)
    py = py.replace("||", " or ").replace("&&", " and ")
    py = py.replace("always()", "True").replace("success()", "(not failed)").replace("failure()", "failed")
    return eval(py, {"__builtins__": {}}, {"failed": failed})


def _interpolate(value: str, context: dict[str, Any]) -> str:
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: str(_github_expr(m.group(1), context, False)), str(value))


@dataclass
class StepRun:
    name: str
    outcome: str  # success, failure or skipped
    log: str = ""


class GitHubRunner:
    """The GitHub Actions job on a fresh runner each run: steps in order, `run:` steps in
    `bash -eo pipefail` with the workflow's env (TEMPI_WORK moved under the rig), outputs
    through $GITHUB_OUTPUT, and `if:` conditions; actions/checkout clones the remote,
    actions/cache keeps the state directory between runs under its key."""

    def __init__(self, rig: CIRig, secrets: dict[str, str]) -> None:
        self.rig = rig
        self.workflow = github_workflow()
        self.workspace = rig.root / "runner" / "work" / "project"
        self.gh_state = rig.root / "gh.json"
        self.summary = rig.root / "step-summary.md"
        self.secrets = secrets
        self.fixed_work = str(self.workflow["env"]["TEMPI_WORK"])
        self.uploaded: list[str] = []
        self.runs = 0
        self.last: list[StepRun] = []

    def logs(self, name: str | None = None) -> str:
        """The last run's output of its `run:` steps (or of the one named)."""
        return "\n".join(f"== {s.name} ({s.outcome})\n{s.log}" for s in self.last if name in (None, s.name))

    def gh_calls(self) -> list[dict[str, Any]]:
        return json.loads(self.gh_state.read_text())["calls"] if self.gh_state.exists() else []

    def _context(self, outputs: dict[str, dict[str, str]]) -> dict[str, Any]:
        return {
            "inputs": {"spec": "pipeline.yaml"},
            "github": {
                "ref": "refs/heads/main",
                "ref_name": "main",
                "token": GITHUB_TOKEN,
                "run_id": str(self.runs),
                "run_attempt": "1",
            },
            "secrets": self.secrets,
            "steps": {sid: {"outputs": out} for sid, out in outputs.items()},
        }

    def _path(self, value: str) -> str:
        return self.rig.work_path(value, self.fixed_work) if value.startswith(self.fixed_work) else value

    def _cache_entry(self, inputs: dict[str, str], context: dict[str, Any]) -> Path | None:
        """actions/cache's choice: the exact key, else the newest entry whose key starts
        with a restore key."""
        exact = self.rig.caches / _interpolate(inputs["key"], context)
        if exact.exists():
            return exact
        entries = sorted(self.rig.caches.glob("*"), key=lambda p: p.stat().st_mtime, reverse=True)
        for prefix in _interpolate(inputs.get("restore-keys", ""), context).split():
            for entry in entries:
                if entry.name.startswith(prefix):
                    return entry
        return None

    def _uses(self, step: dict[str, Any], context: dict[str, Any]) -> None:
        action = step["uses"].split("@")[0]
        work = Path(self._path(step.get("with", {}).get("path", "")))
        if action == "actions/checkout":
            if self.workspace.exists():
                shutil.rmtree(self.workspace)
            self.workspace.parent.mkdir(parents=True, exist_ok=True)
            git(self.rig.root, "clone", "-q", str(self.rig.remote.bare), str(self.workspace))
            git(self.workspace, "remote", "set-url", "origin", GITHUB_URL)
        elif action == "actions/cache/restore":
            entry = self._cache_entry(step["with"], context)
            if entry is not None:
                shutil.copytree(entry / "state", work, symlinks=True)
        elif action == "actions/cache/save":
            # An entry is never overwritten: a key already there keeps what it has.
            entry = self.rig.caches / _interpolate(step["with"]["key"], context)
            if work.exists() and not entry.exists():
                entry.mkdir(parents=True)
                shutil.move(work, entry / "state")
        elif action == "actions/upload-artifact":
            if work.is_file():
                self.uploaded.append(work.name)
        elif action != "astral-sh/setup-uv":
            raise AssertionError(f"the workflow uses {action}, which this rig does not emulate")

    def run(self) -> list[StepRun]:
        self.runs += 1
        self.summary.write_text("")  # each job its own summary
        if self.rig.work.exists():  # a fresh runner
            shutil.rmtree(self.rig.work)
        env = self.rig.base_env(GITHUB_URL)
        # The runner image (and setup-uv) have uv's tool directory on PATH.
        env["PATH"] = f"{self.rig.home / '.local/bin'}{os.pathsep}{env['PATH']}"
        env.update(
            GITHUB_ACTIONS="true",
            GITHUB_WORKSPACE=str(self.workspace),
            GITHUB_STEP_SUMMARY=str(self.summary),
            GH_SHIM_STATE=str(self.gh_state),
        )
        outputs: dict[str, dict[str, str]] = {}
        context = self._context(outputs)
        for key, value in self.workflow["env"].items():
            env[key] = self._path(_interpolate(value, context))
        steps: list[StepRun] = []
        failed = False
        for i, step in enumerate(self.workflow["jobs"]["pipeline"]["steps"]):
            name = step.get("name") or step.get("uses") or str(i)
            condition = str(step.get("if", "success()")).strip()
            if condition.startswith("${{"):
                condition = condition[3:-2]
            if not re.search(r"\b(always|success|failure|cancelled)\(\)", condition):
                condition = f"success() && ({condition})"
            if not _github_expr(condition, self._context(outputs), failed):
                steps.append(StepRun(name, "skipped"))
                continue
            if "uses" in step:
                self._uses(step, self._context(outputs))
                steps.append(StepRun(name, "success"))
                continue
            output = self.rig.root / f"github-output-{i}"
            output.write_text("")
            step_env = {
                **env,
                **{k: _interpolate(v, self._context(outputs)) for k, v in step.get("env", {}).items()},
                "GITHUB_OUTPUT": str(output),
            }
            script = self.rig.root / f"github-step-{i}.sh"
            script.write_text(step["run"])
            proc = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                cwd=self._path(step.get("working-directory", str(self.workspace))),
                env=step_env,
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=JOB_TIMEOUT_S,
            )
            if "id" in step:
                lines = output.read_text().splitlines()
                outputs[step["id"]] = dict(line.split("=", 1) for line in lines if "=" in line)
            outcome = "success" if proc.returncode == 0 else "failure"
            failed = failed or proc.returncode != 0
            steps.append(StepRun(name, outcome, proc.stdout + proc.stderr))
        self.last = steps
        return steps
