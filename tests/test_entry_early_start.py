"""Which command lines start the background server ahead of their own imports: only those
that will open a session on it. A wrong guess starts a server nobody asked for (a codec
server or a cluster user would find one running) or loses the head start."""

from __future__ import annotations

from pathlib import Path

import pytest

from tempi.cli.entry import needs_the_service


@pytest.fixture
def no_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in ("TEMPORAL_ADDRESS", "TEMPORAL_PROFILE", "TEMPORAL_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    return tmp_path


def test_a_prompt_starts_the_server_early(no_cluster: Path) -> None:
    assert needs_the_service(["-p", "hello"])
    assert needs_the_service([])


@pytest.mark.parametrize(
    "argv",
    [
        ["codec-server", "--port", "0"],
        ["web", "--port", "0"],
        ["pipeline", "run", "x.yaml"],
        ["mcp", "list"],
        ["-p", "x", "--help"],
    ],
)
def test_commands_without_a_session_start_none(no_cluster: Path, argv: list[str]) -> None:
    assert not needs_the_service(argv)


@pytest.mark.parametrize("name", ["TEMPORAL_ADDRESS", "TEMPORAL_PROFILE", "TEMPORAL_CONFIG_FILE"])
def test_temporal_settings_of_a_cluster_start_none(
    no_cluster: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv(name, "x")
    assert not needs_the_service(["-p", "hello"])


def test_a_default_temporal_toml_alone_names_no_cluster(no_cluster: Path) -> None:
    (no_cluster / "temporalio").mkdir()
    (no_cluster / "temporalio" / "temporal.toml").write_text('[profile.default]\naddress = "h:7233"\n')
    assert needs_the_service(["-p", "hello"])
