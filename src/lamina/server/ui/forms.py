"""What a page is asked: query strings and form bodies read into typed arguments. Bad input
is a LaminaError with its code, shown on the page as the API would answer it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlencode

from lamina.checks import invalid
from lamina.memory.layers import IDENTIFIER_NAMES, MemoryLayer

#: Rows per page of the memories list (the largest a person asks for).
PAGE_SIZES = (25, 50, 100)


class Params:
    """A query string's or form body's fields: every value of a name, in order."""

    def __init__(self, fields: Mapping[str, list[str]]) -> None:
        self._fields = {k: list(v) for k, v in fields.items()}

    @classmethod
    def parse(cls, text: str) -> Params:
        return cls(parse_qs(text, keep_blank_values=True, max_num_fields=200))

    def get(self, name: str, default: str = "") -> str:
        found = self._fields.get(name)
        return found[0].strip() if found else default

    def raw(self, name: str) -> str:
        """The value as typed (content keeps its spaces and line breaks)."""
        found = self._fields.get(name)
        return found[0].replace("\r\n", "\n") if found else ""

    def getlist(self, name: str) -> list[str]:
        return [v.strip() for v in self._fields.get(name, []) if v.strip()]

    def flag(self, name: str) -> bool:
        return self.get(name) in ("1", "on", "true", "yes")


def identifiers(params: Params) -> dict[str, str]:
    """The identifier fields that are filled in."""
    return {name: value for name in IDENTIFIER_NAMES if (value := params.get(name))}


def layers(params: Params) -> list[str]:
    chosen = params.getlist("layer")
    known = {layer.value for layer in MemoryLayer}
    for name in chosen:
        if name not in known:
            raise invalid(f"unknown layer {name!r}; valid: {', '.join(sorted(known))}", "layer")
    return chosen


def tags(params: Params) -> list[str]:
    """Tags typed comma-separated in one field."""
    return [t.strip() for t in params.get("tags").split(",") if t.strip()]


def json_object(params: Params, name: str) -> dict[str, Any] | None:
    """A JSON object typed in a field (None when empty)."""
    text = params.get(name)
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise invalid(f"{name} is not valid JSON: {exc}", name) from None
    if not isinstance(value, dict):
        raise invalid(f'{name} must be a JSON object, like {{"topic": "food"}}', name)
    return value


def moment(params: Params, name: str) -> datetime | None:
    """A date-time field (``datetime-local`` gives no zone: read as UTC)."""
    text = params.get(name)
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise invalid(f"{name} must be a date and time like 2026-01-31T12:00", name) from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def number(params: Params, name: str, *, low: float, high: float) -> float | None:
    text = params.get(name)
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise invalid(f"{name} must be a number", name) from None
    if not low <= value <= high:
        raise invalid(f"{name} must lie between {low:g} and {high:g}", name)
    return value


def page_size(params: Params) -> int:
    text = params.get("limit")
    return int(text) if text.isdigit() and int(text) in PAGE_SIZES else PAGE_SIZES[0]


def query(pairs: Iterable[tuple[str, str]], **changes: str | None) -> str:
    """A query string of ``pairs`` with ``changes`` applied (None removes a name)."""
    kept = [(k, v) for k, v in pairs if k not in changes and v != ""]
    kept += [(k, v) for k, v in changes.items() if v is not None and v != ""]
    return urlencode(kept)
