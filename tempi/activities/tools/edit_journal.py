"""Remembering applied edits so a retried edit call recognises its own work.

An activity can be retried after its write landed (the worker died before reporting).
The retry would then find oldText gone and fail. Before writing, edit records
{tool call id -> path, hash of the content it is about to write, its result}; a retry
whose file still hashes to that content returns the recorded result instead.
Records are written before the file, so a crash in between leaves a record whose hash
does not match and the retry simply applies the edit.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel


class EditRecord(BaseModel):
    path: str
    post_edit_sha256: str
    text: str
    details: dict[str, Any]


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def journal_dir(state_dir: str | None, spill_dir: str | None) -> Path:
    return Path(state_dir or spill_dir or tempfile.gettempdir()) / "tempi-edit-journal"


def _record_file(directory: Path, tool_call_id: str, path: str) -> Path:
    key = hashlib.sha256(f"{tool_call_id}\0{path}".encode()).hexdigest()
    return directory / f"{key}.json"


def _load(file: Path) -> EditRecord | None:
    try:
        return EditRecord.model_validate_json(file.read_bytes())
    except (OSError, ValueError):
        return None


def _store(file: Path, record: EditRecord) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    temp = file.with_suffix(f".{os.getpid()}.tmp")
    temp.write_text(json.dumps(record.model_dump()))
    os.replace(temp, file)


async def load_record(directory: Path, tool_call_id: str, path: str) -> EditRecord | None:
    return await asyncio.to_thread(_load, _record_file(directory, tool_call_id, path))


async def store_record(directory: Path, tool_call_id: str, record: EditRecord) -> None:
    await asyncio.to_thread(_store, _record_file(directory, tool_call_id, record.path), record)
