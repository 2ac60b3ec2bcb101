"""read: paging, truncation hints, images, binary files, paths; write: files and directories."""

from __future__ import annotations

import base64
import io
import os
import threading
import time
from pathlib import Path

from PIL import Image

from tempi.activities.tools import LocalBackend, ToolContext, ToolOutcome, execute_tool
from tempi.agent.messages import ImageContent


def _text(outcome: ToolOutcome) -> str:
    return "".join(getattr(block, "text", "") for block in outcome.content)


async def _read(root: Path, **args: object) -> ToolOutcome:
    return await execute_tool("read", args, ToolContext(cwd=str(root)))


async def test_small_file_is_returned_whole(tmp_path: Path):
    (tmp_path / "a.txt").write_text("first\nsecond")
    outcome = await _read(tmp_path, path="a.txt")
    assert _text(outcome) == "first\nsecond" and outcome.details is None


async def test_paging_with_offset_and_limit(tmp_path: Path):
    (tmp_path / "a.txt").write_text("".join(f"{n}\n" for n in range(1, 11)))
    page = await _read(tmp_path, path="a.txt", offset=3, limit=2)
    assert _text(page) == "3\n4\n\n[7 more lines in the file. Continue with offset=5.]"
    tail = await _read(tmp_path, path="a.txt", offset=9)
    assert _text(tail) == "9\n10\n"
    past = await _read(tmp_path, path="a.txt", offset=12)
    assert past.is_error and "11 lines" in _text(past)


async def test_byte_limit_cuts_on_a_line_and_names_the_next_offset(tmp_path: Path):
    (tmp_path / "wide.txt").write_text("".join(f"{n:04d}{'-' * 95}\n" for n in range(1, 1001)))
    outcome = await _read(tmp_path, path="wide.txt", offset=11)
    truncation = outcome.details["truncation"]
    assert truncation["truncatedBy"] == "bytes"
    shown = truncation["outputLines"]
    assert shown == 51200 // 100  # 100-byte lines
    body, notice = _text(outcome).split("\n\n[")
    assert body.split("\n")[0].startswith("0011") and body.split("\n")[-1].startswith(f"{10 + shown:04d}")
    assert (
        notice == f"Lines 11-{10 + shown} of 1001 shown (50.0KB limit). Continue with offset={11 + shown}.]"
    )


async def test_huge_file_read_in_a_window(tmp_path: Path):
    with (tmp_path / "big.log").open("w") as handle:
        for n in range(1, 300_001):
            handle.write(f"entry {n}\n")
    outcome = await _read(tmp_path, path="big.log", offset=250_000, limit=3)
    assert _text(outcome) == (
        "entry 250000\nentry 250001\nentry 250002\n\n[49999 more lines in the file. Continue with offset=250003.]"
    )


async def test_a_pipe_is_read_until_its_writer_closes(tmp_path: Path):
    """A named pipe delivers its data in parts: the first read must not be taken for all of it."""
    fifo = tmp_path / "feed"
    os.mkfifo(fifo)

    def write_in_two_parts() -> None:
        with fifo.open("w") as pipe:
            pipe.write("first part\n")
            pipe.flush()
            time.sleep(0.2)
            pipe.write("second part\n")

    writer = threading.Thread(target=write_in_two_parts)
    writer.start()
    try:
        outcome = await _read(tmp_path, path="feed")
    finally:
        writer.join()
    assert _text(outcome) == "first part\nsecond part\n"


async def test_empty_file_and_directory(tmp_path: Path):
    (tmp_path / "empty.txt").write_text("")
    assert _text(await _read(tmp_path, path="empty.txt")) == "(empty file)"
    directory = await _read(tmp_path, path=".")
    assert directory.is_error and "ls" in _text(directory)


async def test_binary_is_refused_but_a_stray_bad_byte_is_not(tmp_path: Path):
    (tmp_path / "prog").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00")
    binary = await _read(tmp_path, path="prog")
    assert binary.is_error and "binary" in _text(binary)
    (tmp_path / "latin.txt").write_bytes("café au lait\n".encode("latin-1"))
    latin = await _read(tmp_path, path="latin.txt")
    assert not latin.is_error and _text(latin) == "caf\ufffd au lait\n"


def _png(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(buffer, format="PNG")
    return buffer.getvalue()


async def test_images_come_back_as_image_blocks(tmp_path: Path):
    data = _png(40, 20)
    (tmp_path / "icon.bin").write_bytes(data)  # detected by content, not by name
    outcome = await _read(tmp_path, path="icon.bin")
    text, image = outcome.content
    assert isinstance(image, ImageContent) and image.mime_type == "image/png"
    assert base64.b64decode(image.data) == data
    assert "image/png" in getattr(text, "text", "")


async def test_huge_images_are_resized(tmp_path: Path):
    (tmp_path / "shot.png").write_bytes(_png(3000, 1200))
    outcome = await _read(tmp_path, path="shot.png")
    image = outcome.content[1]
    assert isinstance(image, ImageContent)
    assert Image.open(io.BytesIO(base64.b64decode(image.data))).size == (2000, 800)
    assert "3000x1200" in _text(outcome) and "2000x800" in _text(outcome)


class _HomeBackend(LocalBackend):
    def __init__(self, home: str) -> None:
        self._home = home

    @property
    def home(self) -> str:
        return self._home


async def test_paths_resolve_against_cwd_home_and_absolute(tmp_path: Path):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "h.txt").write_text("from home")
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "w.txt").write_text("from cwd")
    ctx = ToolContext(cwd=str(tmp_path / "work"), backend=_HomeBackend(str(tmp_path / "home")))
    assert _text(await execute_tool("read", {"path": "~/h.txt"}, ctx)) == "from home"
    assert _text(await execute_tool("read", {"path": "w.txt"}, ctx)) == "from cwd"
    assert _text(await execute_tool("read", {"path": "@w.txt"}, ctx)) == "from cwd"
    assert _text(await execute_tool("read", {"path": str(tmp_path / "home" / "h.txt")}, ctx)) == "from home"


async def test_write_creates_overwrites_and_keeps_permissions(tmp_path: Path):
    ctx = ToolContext(cwd=str(tmp_path))
    created = await execute_tool("write", {"path": "a/b/c.sh", "content": "echo é\n"}, ctx)
    assert not created.is_error and _text(created) == "Wrote 8 bytes to a/b/c.sh"  # é is two bytes
    script = tmp_path / "a" / "b" / "c.sh"
    script.chmod(0o750)
    await execute_tool("write", {"path": "a/b/c.sh", "content": "echo 2\n"}, ctx)
    assert script.read_text() == "echo 2\n" and script.stat().st_mode & 0o777 == 0o750
    assert sorted(p.name for p in script.parent.iterdir()) == ["c.sh"]  # no temp files left
    on_dir = await execute_tool("write", {"path": "a", "content": "x"}, ctx)
    assert on_dir.is_error and "directory" in _text(on_dir)
