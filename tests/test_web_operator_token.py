"""`tempi web` in a container: the token comes from the operator (TEMPI_WEB_TOKEN, or the
file a Secret mounts), stays out of the log and the shared TEMPI_HOME, and a blank one
stops the console instead of a token being made up."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.conftest import run_tempi, tempi_env
from tests.processes import stop_process
from tests.web_rig import console_url

OPERATOR_TOKEN = "operator-set-token-0123456789-abcdefghij"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


def test_a_blank_token_variable_stops_the_console_and_names_what_to_set(home: Path, tmp_path: Path) -> None:
    env = {**tempi_env(home, "127.0.0.1:1"), "TEMPI_WEB_TOKEN": ""}
    done = run_tempi(["web", "--host", "0.0.0.0", "--port", "0"], cwd=tmp_path, env=env, timeout=60)
    assert done.returncode != 0
    assert "TEMPI_WEB_TOKEN is set but empty" in done.stderr
    assert "http://" not in done.stdout
    assert not (home / "web" / "token").exists()

    env["TEMPI_WEB_TOKEN"] = "short"
    done = run_tempi(["web", "--port", "0"], cwd=tmp_path, env=env, timeout=60)
    assert done.returncode != 0
    assert "TEMPI_WEB_TOKEN is too short" in done.stderr and "short" not in done.stdout


@pytest.fixture
def operator_console(home: Path, tmp_path: Path, temporal_address: str) -> Iterator[str]:
    # As a Kubernetes Secret mounts it: a file, named by TEMPI_WEB_TOKEN_FILE.
    secret = tmp_path / "secrets" / "TEMPI_WEB_TOKEN"
    secret.parent.mkdir()
    secret.write_text(OPERATOR_TOKEN + "\n")
    env = {**tempi_env(home, temporal_address), "TEMPI_WEB_TOKEN_FILE": str(secret)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tempi", "web", "--port", "0"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base, printed = console_url(proc)
        assert printed == "<TEMPI_WEB_TOKEN>"  # the log never holds the operator's token
        yield base
    finally:
        stop_process(proc)
        assert proc.stdout is not None and proc.stderr is not None
        assert OPERATOR_TOKEN not in proc.stdout.read() + proc.stderr.read()


async def test_the_operators_token_opens_the_console_and_no_token_file_is_made(
    operator_console: str, home: Path
) -> None:
    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as http:
        async with http.get(operator_console + "/api/sessions") as refused:
            assert refused.status == 401
        async with http.get(operator_console + "/api/sessions", headers={"X-Tempi-Token": "x" * 40}) as wrong:
            assert wrong.status == 401
        async with http.get(
            operator_console + "/api/sessions", headers={"X-Tempi-Token": OPERATOR_TOKEN}
        ) as listed:
            assert listed.status == 200
            assert (await listed.json())["sessions"] == []
    assert not (home / "web" / "token").exists()
