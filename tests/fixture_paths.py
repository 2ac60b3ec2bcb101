"""Where pi's recordings are: tests/fixtures/pi-0.73.1, inside the repository, so a clone
with nothing beside it runs every test."""

from __future__ import annotations

from pathlib import Path

PI_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "pi-0.73.1"
