#!/usr/bin/env python3
"""Regenerate tempi's built-in model catalog from pi's published model list.

pi keeps its catalog in `@mariozechner/pi-ai` (`dist/models.generated.js`). This script
imports that module with `node`, and writes every provider and model, in pi's own JSON
shape, to `tempi/agent/pi_catalog.json` (checked in; tempi and its tests read only that).

    uv run python scripts/pi_catalog.py                        # the pi at /opt/pi-0.73.1
    uv run python scripts/pi_catalog.py --pi-ai DIR            # an unpacked pi-ai package
    uv run python scripts/pi_catalog.py --version 0.74.0       # npm install it into a temp dir

`--record-list-models PI_BIN` also records `pi --list-models` into
`tests/fixtures/pi-<version>/list-models.txt` (the test `tests/test_pi_catalog.py` diffs
tempi's listing against it). pi lists only models whose provider has a key, so the
recording runs pi with a throwaway home whose auth.json holds a dummy key for every
provider of the catalog.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "tempi" / "agent" / "pi_catalog.json"
DEFAULT_PI_AI = Path("/opt/pi-0.73.1/node_modules/@mariozechner/pi-ai")
PACKAGE = "@mariozechner/pi-ai"

# Imports pi-ai's generated models module and prints {"version", "providers"} as JSON,
# keeping pi's provider and model order.
_DUMP = """
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
const dir = process.argv[1];
const pkg = JSON.parse(readFileSync(dir + "/package.json", "utf8"));
const { MODELS } = await import(pathToFileURL(dir + "/dist/models.generated.js").href);
process.stdout.write(JSON.stringify({ version: pkg.version, providers: MODELS }));
"""

# The fields of pi's `Model` kept, in this order; anything else pi adds is kept after them.
_FIELDS = (
    "id", "name", "api", "provider", "baseUrl", "reasoning", "thinkingLevelMap", "input",
    "cost", "contextWindow", "maxTokens", "headers", "compat",
)  # fmt: skip


def _install(version: str, into: Path) -> Path:
    subprocess.run(
        [
            "npm",
            "install",
            "--silent",
            "--no-audit",
            "--no-fund",
            "--prefix",
            str(into),
            f"{PACKAGE}@{version}",
        ],
        check=True,
    )
    return into / "node_modules" / PACKAGE


def dump(pi_ai: Path) -> dict[str, object]:
    out = subprocess.run(
        ["node", "--input-type=module", "-e", _DUMP, str(pi_ai)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    raw = json.loads(out.stdout)
    providers: dict[str, list[dict[str, object]]] = {}
    for provider, models in raw["providers"].items():
        rows = []
        for model in models.values():
            ordered = {k: model[k] for k in _FIELDS if k in model}
            ordered.update({k: v for k, v in model.items() if k not in ordered})
            rows.append(ordered)
        providers[provider] = rows
    return {"package": PACKAGE, "version": raw["version"], "providers": providers}


def to_text(catalog: dict[str, object]) -> str:
    """JSON with one model per line, so a new pi version's changes read as a line diff."""
    providers = catalog["providers"]
    assert isinstance(providers, dict)
    head = {k: v for k, v in catalog.items() if k != "providers"}
    lines = ["{", *(f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()), ' "providers": {']
    for i, (provider, models) in enumerate(providers.items()):
        lines.append(f"  {json.dumps(provider)}: [")
        lines += [
            f"   {json.dumps(m, ensure_ascii=False)}{',' if j < len(models) - 1 else ''}"
            for j, m in enumerate(models)
        ]
        lines.append("  ]" + ("," if i < len(providers) - 1 else ""))
    lines += [" }", "}"]
    return "\n".join(lines) + "\n"


def record_list_models(pi_bin: Path, catalog: dict[str, object], version: str) -> Path:
    providers = catalog["providers"]
    assert isinstance(providers, dict)
    with tempfile.TemporaryDirectory() as home:
        agent = Path(home) / "agent"
        agent.mkdir()
        auth = agent / "auth.json"
        auth.write_text(json.dumps({p: {"type": "api_key", "key": "dummy"} for p in providers}))
        auth.chmod(0o600)
        env = {"PATH": os.environ.get("PATH", ""), "HOME": home, "PI_CODING_AGENT_DIR": str(agent)}
        done = subprocess.run(
            [str(pi_bin), "--list-models"], env=env, capture_output=True, text=True, check=True, timeout=300
        )
    # pi prints the table to stderr in print mode; take whichever stream has it.
    table = done.stdout if done.stdout.strip() else done.stderr
    target = ROOT / "tests" / "fixtures" / f"pi-{version}" / "list-models.txt"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(table)
    return target


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--pi-ai", type=Path, help=f"an installed {PACKAGE} directory")
    source.add_argument("--version", help=f"npm install {PACKAGE}@VERSION into a temp dir and read that")
    parser.add_argument("--output", type=Path, default=CATALOG)
    parser.add_argument(
        "--record-list-models", type=Path, metavar="PI_BIN", help="also record pi --list-models"
    )
    args = parser.parse_args()
    if shutil.which("node") is None:
        print("node is needed to read pi-ai's generated models module", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        pi_ai = _install(args.version, Path(tmp)) if args.version else (args.pi_ai or DEFAULT_PI_AI)
        catalog = dump(pi_ai)
    args.output.write_text(to_text(catalog))
    providers = catalog["providers"]
    assert isinstance(providers, dict)
    count = sum(len(models) for models in providers.values())
    print(f"{PACKAGE} {catalog['version']}: {len(providers)} providers, {count} models -> {args.output}")
    if args.record_list_models:
        target = record_list_models(args.record_list_models, catalog, str(catalog["version"]))
        print(f"pi --list-models -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
