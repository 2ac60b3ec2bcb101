"""A real headless browser for the HTML export and web console tests: Debian's `chromium`
package, run once per page (`dump_dom`, `screenshot`) or driven over the DevTools protocol
(`DevToolsPage`) for pages that must be clicked and typed into.

Without it the tests skip, unless TEMPI_REQUIRE_CHROMIUM=1 (as in CI) makes its absence a
failure. Each call starts a fresh browser with its own profile, so runs never share state.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from PIL import Image, ImageChops, ImageOps

from tests.processes import stop_process

REQUIRE_CHROMIUM_ENV = "TEMPI_REQUIRE_CHROMIUM"
UPDATE_SCREENSHOTS_ENV = "TEMPI_UPDATE_SCREENSHOTS"

# Limits for layout_difference (gray levels 0-255 per 8x8-pixel cell), measured on the HTML
# export: the same page rendered again differs by 0; with another glyph positioning
# (--disable-font-subpixel-positioning) by 0.5, shifted by one pixel by 0.6-1.0, with no
# cell past 48 in any of these. One tool call unfolded measures 2.0 with 0.9% of cells
# changed a lot, the stats table gone 6.1 / 2.4%, the sidebar gone 6.9 / 2.7%. The
# references are taken with Debian's DejaVu fonts (fonts-dejavu-core, which .ci/run installs
# with chromium): another sans-serif family measures 2.0 / 0.55% and fails.
MEAN_LIMIT = 1.5
BIG_CELLS_LIMIT = 0.005


def chromium_bin() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get(REQUIRE_CHROMIUM_ENV) == "1":
            pytest.fail(f"chromium is required ({REQUIRE_CHROMIUM_ENV}=1) but is not installed")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


def _flags(browser: str, profile: Path) -> list[str]:
    return [
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
    ]


def _run(browser: str, profile: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    command = [*_flags(browser, profile), *args]
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


def assert_looks_like(actual: Image.Image, shot: Path, reference: Path, view: str) -> None:
    """The screenshot `actual` (kept at `shot`) lays out as `reference` does; with
    TEMPI_UPDATE_SCREENSHOTS=1 it becomes the reference."""
    if os.environ.get(UPDATE_SCREENSHOTS_ENV) == "1":
        shutil.copyfile(shot, reference)
    mean, big = layout_difference(actual, Image.open(reference).convert("RGB"))
    assert mean < MEAN_LIMIT and big < BIG_CELLS_LIMIT, (
        f"the {view} view looks different from {reference.name}: mean difference {mean:.2f} "
        f"(limit {MEAN_LIMIT}), {big:.2%} of cells changed a lot (limit {BIG_CELLS_LIMIT:.1%}); "
        f"screenshot kept at {shot}; if the change is intended, rerun with {UPDATE_SCREENSHOTS_ENV}=1"
    )


class DevToolsError(AssertionError):
    """Chromium refused a DevTools call; the error it gave is the message."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error)
        self.page_went_away = "navigated or closed" in str(error.get("message", ""))


class DevToolsPage:
    """One tab of a headless chromium, driven through the DevTools protocol's websocket."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._ids = itertools.count(1)

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, profile: Path, size: tuple[int, int] = (1200, 900)) -> AsyncIterator[DevToolsPage]:
        browser = chromium_bin()
        profile.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(
            [*_flags(browser, profile), f"--window-size={size[0]},{size[1]}", "--remote-debugging-port=0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            port_file = profile / "DevToolsActivePort"  # chromium writes the port it chose here
            async with asyncio.timeout(60):
                while not (port_file.is_file() and port_file.read_text().strip()):
                    assert proc.poll() is None, f"chromium exited with {proc.returncode}"
                    await asyncio.sleep(0.05)
            port = port_file.read_text().split()[0]
            async with aiohttp.ClientSession() as http:
                async with http.get(f"http://127.0.0.1:{port}/json/list") as listed:
                    targets = await listed.json()
                target = next(t for t in targets if t.get("type") == "page")
                async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                    yield cls(ws)
        finally:
            stop_process(proc)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        call_id = next(self._ids)
        await self._ws.send_str(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            answer = json.loads((await self._ws.receive()).data)
            if answer.get("id") == call_id:  # events in between are not needed
                if "error" in answer:
                    raise DevToolsError(answer["error"])
                result: dict[str, Any] = answer["result"]
                return result

    async def navigate(self, url: str) -> None:
        await self.call("Page.navigate", url=url)

    async def freeze_clock(self, epoch_ms: int) -> None:
        """`Date.now()` answers `epoch_ms` in every page loaded from now on (timers still run),
        so that ages shown relative to now stay the same from one run to the next."""
        await self.call("Page.enable")
        await self.call(
            "Page.addScriptToEvaluateOnNewDocument",
            source=f"Date.now = function () {{ return {epoch_ms}; }};",
        )

    async def viewport(self, size: tuple[int, int]) -> None:
        """Lay pages out in exactly `size` CSS pixels at scale 1, whatever the window's frame."""
        await self.call(
            "Emulation.setDeviceMetricsOverride",
            width=size[0],
            height=size[1],
            deviceScaleFactor=1,
            mobile=False,
        )

    async def screenshot(self, out: Path) -> Image.Image:
        """What the viewport shows now, written to `out`."""
        shot = await self.call("Page.captureScreenshot", format="png")
        out.write_bytes(base64.b64decode(shot["data"]))
        return Image.open(out).convert("RGB")

    async def evaluate(self, expression: str) -> Any:
        done = await self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        assert "exceptionDetails" not in done, done["exceptionDetails"]
        return done["result"].get("value")

    async def wait_for(self, expression: str, timeout: float = 30) -> Any:
        """The value of `expression` once it is truthy, asked again as the page changes."""
        try:
            async with asyncio.timeout(timeout):
                while True:
                    # A page on its way in (after a click on a link) may lack what it names yet,
                    # and one on its way out drops the evaluation: ask the next page.
                    try:
                        value = await self.evaluate(
                            f"(() => {{ try {{ return ({expression}); }} catch (e) {{ return null; }} }})()"
                        )
                    except DevToolsError as error:
                        if not error.page_went_away:
                            raise
                        value = None
                    if value:
                        return value
                    await asyncio.sleep(0.05)
        except TimeoutError:
            page = await self.evaluate("document.body ? document.body.innerText.slice(-1500) : ''")
            raise AssertionError(f"timed out waiting for {expression}; the page shows:\n{page}") from None
