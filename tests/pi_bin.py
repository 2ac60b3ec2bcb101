"""Finding pi 0.73.1 for the interop tests: through PI_BIN or PATH only.

Without it the tests skip, unless TEMPI_REQUIRE_PI=1 makes its absence a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def pi_bin() -> str:
    # PI_BIN names it wherever it was installed (.ci/run sets it); no machine path is assumed.
    pi_bin = os.environ.get("PI_BIN", "")
    found = (pi_bin if pi_bin and Path(pi_bin).exists() else None) or shutil.which("pi")
    if found is None:
        if os.environ.get("TEMPI_REQUIRE_PI"):
            pytest.fail("pi 0.73.1 is required (TEMPI_REQUIRE_PI is set) but was not found")
        pytest.skip("pi is not installed (npm install @mariozechner/pi-coding-agent@0.73.1)")
    version = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=60)
    assert "0.73.1" in version.stdout + version.stderr, version.stdout + version.stderr
    return found
