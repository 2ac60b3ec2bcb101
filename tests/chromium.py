"""A real headless browser for the HTML export tests: Debian's `chromium` package.

Without it the tests skip, unless TEMPI_REQUIRE_CHROMIUM=1 (as in CI) makes its absence a
failure. Each call starts a fresh browser with its own profile, so runs never share state.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image, ImageChops, ImageOps

REQUIRE_CHROMIUM_ENV = "TEMPI_REQUIRE_CHROMIUM"


def chromium_bin() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get(REQUIRE_CHROMIUM_ENV) == "1":
            pytest.fail(f"chromium is required ({REQUIRE_CHROMIUM_ENV}=1) but is not installed")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


def _run(browser: str, profile: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    command = [
        browser,
        "--headless",
        # The tests may run as root, where Chromium's sandbox cannot start.
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        "--force-color-profile=srgb",
        f"--user-data-dir={profile}",
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"chromium failed ({done.returncode}): {done.stderr[-2000:]}"
    return done


def dump_dom(browser: str, url: str, profile: Path) -> str:
    """The page's DOM after its scripts ran, as the reader would see it."""
    return _run(browser, profile, ["--dump-dom", url]).stdout


def screenshot(browser: str, url: str, out: Path, profile: Path, size: tuple[int, int]) -> Image.Image:
    _run(browser, profile, [f"--window-size={size[0]},{size[1]}", f"--screenshot={out}", url])
    return Image.open(out).convert("RGB")


def layout_difference(actual: Image.Image, reference: Image.Image, cell: int = 8) -> tuple[float, float]:
    """How far two screenshots differ in layout: (mean difference, share of cells that
    changed a lot), on grayscale images shrunk so that each `cell`×`cell` square of pixels
    becomes one averaged pixel.

    Font rasterisation (hinting, antialiasing, a different build of the same font) moves
    glyph edges by a fraction of a pixel; averaged over a cell that shifts its gray level by
    a few units out of 255. A layout change (a block missing, moved or restyled, a sidebar
    gone) turns whole cells from background to text or border, tens of units at once.
    """
    assert actual.size == reference.size, f"screenshot is {actual.size}, reference {reference.size}"
    small = (actual.size[0] // cell, actual.size[1] // cell)
    a = ImageOps.grayscale(actual).resize(small, Image.Resampling.BOX)
    b = ImageOps.grayscale(reference).resize(small, Image.Resampling.BOX)
    diff = ImageChops.difference(a, b)
    histogram = diff.histogram()
    cells = small[0] * small[1]
    mean = sum(level * count for level, count in enumerate(histogram)) / cells
    big = sum(histogram[48:]) / cells
    return mean, big
