#!/usr/bin/env python3
"""Record `pi --help` into `tests/fixtures/pi-<version>/help.txt`.

tests/test_pi_flags.py walks the recording's option list and checks that tempi accepts
every flag pi accepts. pi prints its help on stderr; it runs here with a throwaway HOME and
PI_CODING_AGENT_DIR, so nothing of the machine's pi setup shows in the recording.

    uv run python scripts/record_pi_help.py                      # the pi at /opt/pi-0.73.1
    uv run python scripts/record_pi_help.py --pi PATH/TO/pi
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PI = "/opt/pi-0.73.1/node_modules/.bin/pi"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pi", default=DEFAULT_PI, help=f"the pi to record (default {DEFAULT_PI})")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pi-help-") as scratch:
        env = {
            **os.environ,
            "HOME": scratch,
            "PI_CODING_AGENT_DIR": str(Path(scratch) / "agent"),
            "PI_OFFLINE": "1",
            "NO_COLOR": "1",
        }
        version = subprocess.run(
            [args.pi, "--version"], env=env, capture_output=True, text=True, check=True, timeout=60
        )
        shown = subprocess.run(
            [args.pi, "--help"], env=env, capture_output=True, text=True, check=True, timeout=60
        )
    number = (version.stdout + version.stderr).strip().split()[-1]
    target = ROOT / "tests" / "fixtures" / f"pi-{number}" / "help.txt"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(shown.stdout + shown.stderr)
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
