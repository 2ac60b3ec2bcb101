"""`tempi server --port`: a dev server in the foreground, which every local user can reach,
with the owner's worker. It says so at start (issue 42) and listens on loopback only."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import tempi.workers.service as service
from tempi.cli.main import cmd_server
from tempi.workers.dev_server import dev_server_args


def test_the_foreground_server_warns_that_any_local_user_can_make_its_worker_run_things(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("TEMPI_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "no-pi"))
    served: list[dict[str, Any]] = []

    async def fake_serve(home: Path, **kwargs: Any) -> None:
        served.append(kwargs)

    monkeypatch.setattr(service, "serve", fake_serve)
    assert asyncio.run(cmd_server(["--port", "7299"])) == 0
    assert served and served[0]["port"] == 7299
    err = capsys.readouterr().err
    assert "127.0.0.1:7299" in err
    assert "every local user" in err
    assert "as you" in err
    assert "without `tempi server`" in err  # the way out: the default embedded server


def test_the_dev_server_and_its_web_ui_listen_on_loopback_only(tmp_path: Path) -> None:
    args = dev_server_args("temporal", tmp_path / "t.db", 7299)
    assert args[args.index("--ip") + 1] == "127.0.0.1"
    # The web UI binds to --ip unless told otherwise; its HTTP and metrics ports too.
    assert "--ui-ip" not in args
