"""Where pi's recordings are: `shared/` sits beside the repository (here and in CI)."""

from __future__ import annotations

import os
from pathlib import Path

PI_FIXTURES = Path(
    os.environ.get(
        "TEMPI_PI_FIXTURES", Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "pi-0.73.1"
    )
)
