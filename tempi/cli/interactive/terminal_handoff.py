"""Keys that lend the terminal or the clipboard to something else: the external editor
(Ctrl+G) and an image pasted from the clipboard (Ctrl+V), as pi does them."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from prompt_toolkit.application import run_in_terminal

from tempi.cli.interactive.key_host import KeyHost
from tempi.cli.interactive.render import notice

NO_EDITOR = "Warning: No editor configured. Set $VISUAL or $EDITOR environment variable."
CLIPBOARD_TIMEOUT_S = 3.0
# The image types tried, in pi's order of preference.
IMAGE_TYPES = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}


async def edit_externally(app: KeyHost) -> None:
    """Open the editor's text in $VISUAL (or $EDITOR); if the editor exits 0, its file
    replaces the text, else the text stays as it was."""
    command = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not command:
        await app.show(notice(NO_EDITOR, "yellow"))
        return
    path = _private_temp_file("tempi-editor-", ".md", app.input.text.encode("utf-8"))
    # pi splits on spaces, so `code --wait` works.
    argv = [*command.split(" "), str(path)]

    def run() -> int:
        try:
            return subprocess.run(argv, check=False).returncode
        except OSError:
            return -1

    try:
        code = await run_in_terminal(run, in_executor=True)
        if code == 0:
            text = path.read_text(encoding="utf-8").removesuffix("\n")
            app.input.text = text
            app.input.cursor_position = len(text)
        elif code == -1:
            await app.show(notice(f"Could not start the editor {command!r}; check $VISUAL/$EDITOR.", "red"))
    finally:
        path.unlink(missing_ok=True)


def _run(argv: list[str]) -> bytes | None:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=CLIPBOARD_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 and done.stdout else None


def read_clipboard_image() -> tuple[bytes, str] | None:
    """The clipboard's image and its file extension, from wl-paste or xclip (or pngpaste on
    macOS); None when there is no image or no tool to read it."""
    if shutil.which("wl-paste"):
        listed = _run(["wl-paste", "--list-types"]) or b""
        for mime, ext in IMAGE_TYPES.items():
            if mime.encode() in listed.split():
                data = _run(["wl-paste", "--no-newline", "--type", mime])
                if data:
                    return data, ext
    if shutil.which("xclip"):
        listed = _run(["xclip", "-selection", "clipboard", "-t", "TARGETS", "-o"]) or b""
        for mime, ext in IMAGE_TYPES.items():
            if mime.encode() in listed.split():
                data = _run(["xclip", "-selection", "clipboard", "-t", mime, "-o"])
                if data:
                    return data, ext
    if shutil.which("pngpaste"):
        data = _run(["pngpaste", "-"])
        if data:
            return data, "png"
    return None


async def paste_image(app: KeyHost) -> None:
    """Save the clipboard's image to a temporary file and type its path at the cursor, as pi
    does. Without an image (or a tool to read the clipboard) nothing happens, as in pi."""
    found = await asyncio.to_thread(read_clipboard_image)
    if found is None:
        return
    data, ext = found
    path = _private_temp_file("tempi-clipboard-", f".{ext}", data)
    app.input.insert_text(str(path))


def _private_temp_file(prefix: str, suffix: str, data: bytes) -> Path:
    """A new file only its owner can read, under a name nobody could guess or plant a link at
    beforehand (the temp directory is shared with every other user)."""
    fd, name = tempfile.mkstemp(prefix=prefix, suffix=suffix)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return Path(name)
