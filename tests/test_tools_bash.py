"""bash: process groups, timeouts, abort, streaming, truncation and the spill file."""

from __future__ import annotations

import asyncio
import os
import signal
import tracemalloc
from pathlib import Path

import pytest

from tempi.activities.tools import ToolContext, ToolOutcome, execute_tool
from tempi.agent.events import ToolOutput


def _text(outcome: ToolOutcome) -> str:
    return "".join(getattr(block, "text", "") for block in outcome.content)


def _alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie nobody has reaped yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def _gone(pid: int) -> bool:
    for _ in range(100):
        if not _alive(pid):
            return True
        await asyncio.sleep(0.02)
    return False


async def _bash(tmp_path: Path, command: str, **kwargs: object) -> ToolOutcome:
    args: dict[str, object] = {"command": command}
    if "timeout" in kwargs:
        args["timeout"] = kwargs.pop("timeout")
    ctx = ToolContext(cwd=str(tmp_path), spill_dir=str(tmp_path / "spill"), **kwargs)  # type: ignore[arg-type]
    return await execute_tool("bash", args, ctx)


async def test_output_runs_in_cwd_and_merges_streams_in_order(tmp_path: Path):
    outcome = await _bash(tmp_path, "pwd; echo to-stderr >&2; echo to-stdout")
    assert not outcome.is_error
    assert _text(outcome) == f"{tmp_path}\nto-stderr\nto-stdout\n"
    assert outcome.details is None


async def test_silent_success_and_terminal_noise(tmp_path: Path):
    assert _text(await _bash(tmp_path, "true")) == "(no output)"
    colored = await _bash(tmp_path, r"printf '\033[31mred\033[0m\r\nprogress 50%%\rprogress 100%%\n'")
    assert _text(colored) == "red\nprogress 100%\n"


async def test_timeout_kills_the_whole_process_group(tmp_path: Path):
    outcome = await _bash(tmp_path, "sleep 30 & echo $! > child.pid; echo started; wait", timeout=0.5)
    assert outcome.is_error
    assert _text(outcome) == "started\n\n\nCommand timed out after 0.5 seconds"
    assert await _gone(int((tmp_path / "child.pid").read_text()))


async def test_abort_kills_the_command_and_keeps_its_output(tmp_path: Path):
    abort = asyncio.Event()

    def on_update(partial: ToolOutput) -> None:
        if any("started" in getattr(block, "text", "") for block in partial.content):
            abort.set()

    outcome = await _bash(
        tmp_path, "sleep 30 & echo $! > child.pid; echo started; wait", on_update=on_update, abort=abort
    )
    assert outcome.is_error
    assert _text(outcome) == "started\n\n\nCommand aborted"
    assert await _gone(int((tmp_path / "child.pid").read_text()))


async def test_cancelling_the_call_kills_the_process_group(tmp_path: Path):
    started = asyncio.Event()

    def on_update(partial: ToolOutput) -> None:
        if partial.content:
            started.set()

    call = asyncio.create_task(
        _bash(tmp_path, "sleep 30 & echo $! > child.pid; echo started; wait", on_update=on_update)
    )
    await asyncio.wait_for(started.wait(), timeout=10)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert await _gone(int((tmp_path / "child.pid").read_text()))


async def test_updates_stream_the_accumulated_output(tmp_path: Path):
    updates: list[ToolOutput] = []
    outcome = await _bash(tmp_path, "echo one; sleep 0.4; echo two", on_update=updates.append)
    texts = ["".join(getattr(block, "text", "") for block in update.content) for update in updates]
    assert updates[0].content == []  # the tool has started
    assert "one\n" in texts  # output arrived before the command finished
    assert texts[-1] == "one\ntwo\n" == _text(outcome)


async def test_failures_keep_output_and_name_the_cause(tmp_path: Path):
    exited = await _bash(tmp_path, "echo partial; exit 7")
    assert exited.is_error and _text(exited) == "partial\n\n\nCommand exited with code 7"
    killed = await _bash(tmp_path, "kill -9 $$")
    assert killed.is_error and "signal 9" in _text(killed)


async def test_truncated_output_points_at_a_file_with_everything(tmp_path: Path):
    line = "x" * 99
    outcome = await _bash(tmp_path, f'for i in $(seq 1 3000); do echo "$i {line}"; done')
    assert not outcome.is_error
    truncation = outcome.details["truncation"]
    assert truncation["truncatedBy"] == "bytes" and truncation["totalLines"] == 3001
    full = Path(outcome.details["fullOutputPath"])
    assert full.parent == tmp_path / "spill"
    assert full.read_text() == "".join(f"{n} {line}\n" for n in range(1, 3001))
    text = _text(outcome)
    assert text.endswith(f"of 3001 shown (50.0KB limit). Full output: {full}]")
    assert text.split("\n\n[")[0].endswith(f"3000 {line}\n")


async def test_one_huge_line_keeps_its_end(tmp_path: Path):
    outcome = await _bash(tmp_path, "head -c 100000 /dev/zero | tr '\\0' y; echo -n END")
    truncation = outcome.details["truncation"]
    assert truncation["lastLinePartial"] is True and truncation["outputBytes"] == 50 * 1024
    assert _text(outcome).split("\n\n[")[0].endswith("yyyEND")
    assert "(the line is 97.7KB)" in _text(outcome)


async def test_large_output_does_not_accumulate_in_memory(tmp_path: Path):
    tracemalloc.start()
    try:
        outcome = await _bash(tmp_path, "yes tempi | head -c 30000000")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not outcome.is_error
    assert peak < 5_000_000
    assert os.path.getsize(outcome.details["fullOutputPath"]) == 30_000_000
    assert outcome.details["truncation"]["totalBytes"] == 30_000_000
    assert outcome.details["truncation"]["totalLines"] == 5_000_001
    assert _text(outcome).startswith("tempi\n")


async def test_the_spill_file_stops_at_its_cap_and_the_result_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Issue 42: a command printing gigabytes filled ~/.tempi with its spill file. The file
    stops at TEMPI_SPILL_MAX_MB (default 64); the model's tail and the counts go on."""
    monkeypatch.setenv("TEMPI_SPILL_MAX_MB", "1")
    outcome = await _bash(tmp_path, "yes tempi | head -c 3000000; echo the-end")
    assert not outcome.is_error
    full = Path(outcome.details["fullOutputPath"])
    assert os.path.getsize(full) == 1024 * 1024
    assert full.read_bytes().startswith(b"tempi\ntempi\n")
    assert outcome.details["truncation"]["totalBytes"] == 3_000_008
    assert outcome.details["fullOutputCut"] is True
    text = _text(outcome)
    assert text.split("\n\n[")[0].endswith("tempi\nthe-end\n")
    assert f"Output saved to {full} only up to 1.0MB (TEMPI_SPILL_MAX_MB)" in text


async def test_a_full_disk_under_the_spill_file_ends_the_call_with_a_note(tmp_path: Path):
    """Issue 42: the spill file's ENOSPC killed the output reader, so a chatty command
    blocked on its full pipe and the call hung until aborted. Now the spilling stops, the
    command runs to its end, and the result says the full output could not be saved."""
    from tests.full_disk import full_disk_at

    with full_disk_at(tmp_path / "spill"):
        outcome = await asyncio.wait_for(_bash(tmp_path, "seq 1 2000000; echo the-end"), timeout=30)
        assert list((tmp_path / "spill").glob("tempi-bash-*")) == []  # the partial file went
    assert not outcome.is_error
    text = _text(outcome)
    assert text.split("\n\n[")[0].endswith("2000000\nthe-end\n")
    assert "The full output could not be saved: no space left on the device holding" in text
    assert "fullOutputPath" not in outcome.details
    assert outcome.details["truncation"]["totalLines"] == 2_000_002


async def test_a_background_job_holding_the_output_does_not_hang_the_call(tmp_path: Path):
    outcome = await asyncio.wait_for(_bash(tmp_path, "sleep 30 & echo $! > bg.pid; echo done"), timeout=10)
    assert _text(outcome) == "done\n"
    os.kill(int((tmp_path / "bg.pid").read_text()), signal.SIGKILL)


async def test_missing_working_directory_is_an_error(tmp_path: Path):
    outcome = await execute_tool("bash", {"command": "echo hi"}, ToolContext(cwd=str(tmp_path / "gone")))
    assert outcome.is_error and "does not exist" in _text(outcome)


async def test_a_linked_output_folder_is_never_written_through(tmp_path: Path):
    """Issue 42, item 5: a model that could reach the session's side folder swapped its
    output folder for a link, and the worker wrote the command's output outside."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "spill").symlink_to(elsewhere)
    outcome = await _bash(tmp_path, "yes tempi | head -c 300000; echo the-end")
    assert outcome.is_error and "is a link" in _text(outcome)
    assert list(elsewhere.iterdir()) == []
