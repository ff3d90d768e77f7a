"""Reading JSON out of chat answers (lamina.llm.answers): fences, prose, cut-short lists."""

from __future__ import annotations

import pytest

from lamina.llm.answers import parse_json, parse_json_object, salvage_items


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ("```\n[1, 2]\n```", [1, 2]),
        ('Here you go: {"a": {"b": [1]}} - done', {"a": {"b": [1]}}),
        ('```json\n{"a": 1}', {"a": 1}),  # an unclosed fence
        ('{"a": 1} {"b": 2}', {"a": 1}),  # the first one
    ],
)
def test_parse_json_finds_the_answer(raw: str, expected: object) -> None:
    assert parse_json(raw) == expected


@pytest.mark.parametrize("raw", ["", "no json here", '{"a": ', "[1, 2"])
def test_parse_json_refuses_what_is_not_there(raw: str) -> None:
    with pytest.raises(ValueError):
        parse_json(raw)
    assert parse_json_object(raw) is None


def test_parse_json_object_wants_an_object() -> None:
    assert parse_json_object("[1, 2]") is None
    assert parse_json_object('ok {"tool": null}') == {"tool": None}


def test_salvage_keeps_the_complete_items_of_a_cut_answer() -> None:
    raw = '{"facts": ["a", {"text": "b", "sources": [1]}, "c'
    assert salvage_items(raw, "facts") == ["a", {"text": "b", "sources": [1]}]
    assert salvage_items('```json\n{"facts": ["x", ', "facts") == ["x"]
    assert salvage_items('{"facts": []}', "facts") == []
    assert salvage_items('{"other": [1]}', "facts") == []
