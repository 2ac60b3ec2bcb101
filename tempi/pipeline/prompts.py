"""`{{name}}` placeholders in a pipeline's prompts: which exist, and filling them in.

Placeholders are checked when the spec is loaded, so a typo is an error before any shard
runs rather than a prompt that reaches the model with `{{shard.flies}}` in it."""

from __future__ import annotations

import re
from collections.abc import Mapping

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}")

SHARD_PLACEHOLDERS: dict[str, str] = {
    "shard.files": "the shard's targets, separated by spaces",
    "shard.files_list": "the shard's targets, one per line",
    "shard.directory": "the directory the shard's targets share ('.' for the top)",
    "shard.index": "the shard's number, from 1",
    "shard.count": "how many shards the pipeline has",
    "shard.id": "the shard's stable id",
    "pipeline.name": "the spec's name",
    "pipeline.base": "the base commit",
}
VERIFY_PLACEHOLDERS: dict[str, str] = {
    "verify.tail": "the end of the verify command's output",
    "verify.command": "the verify command",
    "verify.exit_code": "the verify command's exit code",
}


def placeholders_in(template: str) -> list[str]:
    return [m.group(1) for m in PLACEHOLDER.finditer(template)]


def unknown_placeholders(template: str, known: Mapping[str, str]) -> list[str]:
    return list(dict.fromkeys(name for name in placeholders_in(template) if name not in known))


def render(template: str, values: Mapping[str, str]) -> str:
    """Fill in every placeholder; one with no value stays as written (the spec check keeps
    unknown names out, so this only happens for a value the caller does not have yet)."""
    return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)
