"""Tool arguments shown while their JSON is still arriving."""

from __future__ import annotations

import json

import pytest

from tempi.activities.llm.partial_json import parse_arguments, parse_partial_arguments

DOCUMENT = {
    "path": "src/app.py",
    "edits": [{"oldText": 'a\\"b', "newText": "caf\u00e9"}],
    "limit": 20,
    "all": True,
}


def test_every_prefix_of_a_document_parses_to_an_object_that_grows_towards_it() -> None:
    text = json.dumps(DOCUMENT)
    seen_keys: set[str] = set()
    for end in range(len(text) + 1):
        parsed = parse_partial_arguments(text[:end])
        assert isinstance(parsed, dict)
        assert set(parsed) <= set(DOCUMENT)
        assert seen_keys <= set(parsed)
        seen_keys = set(parsed)
    assert parse_partial_arguments(text) == DOCUMENT


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("", {}),
        ("{", {}),
        ('{"pa', {}),
        ('{"path": "hello.', {"path": "hello."}),
        ('{"path": "a.py", "con', {"path": "a.py"}),
        ('{"path": "a.py", "content": ', {"path": "a.py"}),
        ('{"n": tr', {}),
        ('{"items": [1, 2, {"x": "y', {"items": [1, 2, {"x": "y"}]}),
        ('{"s": "line\\', {"s": "line"}),
        ('{"s": "caf\\u00', {"s": "caf"}),
    ],
)
def test_unfinished_values(prefix: str, expected: dict[str, object]) -> None:
    assert parse_partial_arguments(prefix) == expected


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '"a string"', '{"a": 1'])
def test_final_arguments_that_are_not_a_complete_object_become_empty(text: str) -> None:
    assert parse_arguments(text) == {}


def test_final_arguments_parse_normally() -> None:
    assert parse_arguments('{"command": "ls"}') == {"command": "ls"}
