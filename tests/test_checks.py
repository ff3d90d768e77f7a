"""The shared argument checks (lamina/checks.py): what each accepts, and the code, message and
details of what it refuses (the services' errors are these)."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any

import pytest

from lamina.checks import (
    check_actor,
    check_choice,
    check_content,
    check_cursor,
    check_flag,
    check_fraction,
    check_id,
    check_int,
    check_json_object,
    check_key,
    check_limit,
    check_metadata,
    check_number,
    check_query,
    check_strings,
    check_text,
    invalid,
)
from lamina.errors import ErrorCode, LaminaError


class Colour(StrEnum):
    RED = "red"
    BLUE = "blue"


def refused(call: Callable[[], Any]) -> LaminaError:
    with pytest.raises(LaminaError) as err:
        call()
    return err.value


def test_invalid_names_the_field_when_given() -> None:
    assert invalid("bad", "x", valid=[1]).details == {"field": "x", "valid": [1]}
    assert invalid("bad").details == {}
    assert invalid("bad").code is ErrorCode.INVALID_ARGUMENT


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "content must be a string, got NoneType"),
        ("  \n", "content is empty"),
        ("a\x00b", "content contains a NUL character"),
        ("lone \ud800", "content is not valid Unicode (lone surrogate)"),
    ],
)
def test_required_text(value: object, message: str) -> None:
    err = refused(lambda: check_content(value, 10))
    assert (err.code, err.message, err.details) == (
        ErrorCode.INVALID_ARGUMENT,
        message,
        {"field": "content"},
    )


def test_content_and_query_lengths() -> None:
    assert check_content(" hi ", 4) == " hi "
    err = refused(lambda: check_content("hello", 4))
    assert err.code is ErrorCode.CONTENT_TOO_LONG
    assert err.message == "content is 5 characters; the maximum is 4"
    assert err.details == {"max_length": 4, "length": 5}
    err = refused(lambda: check_query("hello", 4))
    assert err.code is ErrorCode.QUERY_TOO_LONG and err.details == {"max_length": 4, "length": 5}


def test_optional_text() -> None:
    assert check_text("summary", None, 5) == ""
    assert check_text("summary", " a ", 5) == " a "
    assert refused(lambda: check_text("t", 3, 5)).message == (
        "t must be a string without NUL characters"
    )
    assert refused(lambda: check_text("t", " ", 5, required=True)).message == "t must not be empty"
    err = refused(lambda: check_text("t", "abcdef", 5))
    assert err.code is ErrorCode.CONTENT_TOO_LONG
    assert err.details == {"field": "t", "max_length": 5}


def test_keys() -> None:
    assert check_key("name", " a ") == "a"
    assert check_key("session_key", " a ", strip=False) == " a "
    assert refused(lambda: check_key("name", "")).message == "name must be a non-empty string"
    err = refused(lambda: check_key("name", "x" * 257))
    assert err.message == "name must be at most 256 characters, without NUL"
    assert err.details == {"field": "name"}


def test_ids_and_actors() -> None:
    assert check_id("m-1") == "m-1"
    assert refused(lambda: check_id(" ")).message == "id must be a non-empty string"
    assert refused(lambda: check_id("x" * 257)).message == "id is longer than 256 characters"
    assert check_actor(None) is None and check_actor("ann") == "ann"
    assert refused(lambda: check_actor(7)).details == {}


def test_choices() -> None:
    assert check_choice("colour", "red", Colour) is Colour.RED
    for wrong in ("green", None, ["red"]):
        err = refused(lambda wrong=wrong: check_choice("colour", wrong, Colour))
        assert err.message == f"colour {wrong!r} is not one of red, blue"
        assert err.details == {"field": "colour", "valid": ["red", "blue"]}


def test_string_lists() -> None:
    assert check_strings("tags", None, max_items=2) == []
    assert check_strings("tags", [" a", "a ", "b"], max_items=3) == ["a", "b"]
    assert refused(lambda: check_strings("tags", "a", max_items=2)).message == (
        "tags must be a list of strings"
    )
    assert refused(lambda: check_strings("tags", ["a", "b", "c"], max_items=2)).message == (
        "tags must be at most 2 non-empty strings"
    )
    for bad in (["a\x00"], [""], [3]):
        err = refused(lambda bad=bad: check_strings("tags", bad, max_items=2, max_length=3))
        assert err.message == "tags must be at most 2 non-empty strings of at most 3 characters"


def test_integers_limits_and_numbers() -> None:
    assert check_int("n", 0) == 0
    assert refused(lambda: check_int("n", True)).message == "n must be an integer"
    assert refused(lambda: check_int("start", -1, minimum=0)).message == (
        "start must be a non-negative integer"
    )
    assert refused(lambda: check_int("limit", 0, minimum=1)).message == (
        "limit must be a positive integer"
    )
    err = refused(lambda: check_int("limit", 9, minimum=1, maximum=5, max_limit=5))
    assert err.message == "limit must be an integer from 1 to 5"
    assert err.details == {"field": "limit", "max_limit": 5}
    assert check_limit(None, default=3, maximum=5) == 3
    assert refused(lambda: check_limit("3", default=3, maximum=5)).message == (
        "limit must be an integer"
    )
    assert refused(lambda: check_limit(6, default=3, maximum=5)).message == (
        "limit must be from 1 to 5"
    )
    assert check_number("min_score", 1) == 1.0
    for bad in (True, "0.5", float("nan")):
        err = refused(lambda bad=bad: check_number("min_score", bad))
        assert err.message == "min_score must be a number" and err.details == {"field": "min_score"}
    assert (check_fraction("threshold", 0), check_fraction("threshold", 1)) == (0.0, 1.0)
    for bad, message in ((2, "must be from 0 to 1, not 2"), (float("nan"), "must be a number")):
        err = refused(lambda bad=bad: check_fraction("threshold", bad))
        assert err.message == f"threshold {message}" and err.details == {"field": "threshold"}


def test_flags_and_cursors() -> None:
    assert check_flag("success", False) is False
    assert refused(lambda: check_flag("success", 1)).message == "success must be true or false"
    assert check_cursor(None) is None and check_cursor("c") == "c"
    assert refused(lambda: check_cursor(1)).message == "cursor must be a string from next_cursor"


def test_metadata_and_json_objects() -> None:
    assert check_metadata(None) == {}
    assert check_metadata({"tags": ["a", "a"], "n": 1.5}) == {"tags": ["a"], "n": 1.5}
    assert check_metadata({"tags": None}, partial=True) == {"tags": None}
    assert refused(lambda: check_metadata({"tags": None})).details == {"field": "tags"}
    assert refused(lambda: check_metadata([])).message == "metadata must be an object, got list"
    err = refused(lambda: check_metadata({"a": {"b": float("inf")}}))
    assert err.message == "metadata a.b is not a finite number" and err.details == {"field": "a.b"}
    err = refused(lambda: check_metadata({"a": "x" * 70_000}))
    assert err.details == {"max_bytes": 65_536}
    # Text no store can hold (PostgreSQL's jsonb takes no NUL; no store a lone surrogate),
    # in a value or in a key, at any depth.
    for bad, field in [
        ({"a": "x\x00y"}, "a"),
        ({"a": [{"b": "\x00"}]}, "a[0].b"),
        ({"a\x00": 1}, "metadata"),
        ({"a": {"k\ud800": 1}}, "a"),
    ]:
        assert refused(lambda bad=bad: check_metadata(bad)).details == {"field": field}, bad
    err = refused(lambda: check_json_object("parameters", {"a": object()}))
    assert err.message == "parameters a has unsupported type object"
    assert err.details == {"field": "parameters"}
