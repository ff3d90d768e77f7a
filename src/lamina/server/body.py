"""Request bodies as strict JSON (RFC 8259): UTF-8, no NaN or Infinity, numbers a double can
hold, strings that are valid Unicode, nesting the parser can follow. What passes can be
converted to protobuf, stored and sent back; what does not is the client's mistake, told in
``BadBody``'s message."""

from __future__ import annotations

import json
import math
import re
from typing import Any
from urllib.parse import parse_qsl

__all__ = ["BadBody", "bad_query", "read_json"]

# An escaped UTF-16 surrogate (\uD800-\uDFFF): a lone one decodes to an invalid string.
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


class BadBody(ValueError):
    pass


def _constant(name: str) -> Any:
    raise BadBody(f"{name} is not a JSON number")


def _too_large(text: str) -> BadBody:
    shown = text if len(text) <= 32 else text[:32] + "..."
    return BadBody(f"the number {shown} does not fit a double")


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _too_large(text)
    return value


def _int(text: str) -> int:
    if len(text) > 310:  # the largest double has 309 digits
        raise _too_large(text)
    value = int(text)
    try:
        float(value)
    except OverflowError:
        raise _too_large(text) from None
    return value


def _lone_surrogate(value: Any) -> bool:
    """Whether a string in ``value`` (a key or a value, at any depth) is not valid Unicode."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False


def read_json(raw: bytes) -> Any:
    """The JSON value of ``raw``; BadBody saying what is wrong when it is not strict JSON."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadBody(f"the body is not valid UTF-8 (byte {exc.start})") from None
    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except RecursionError:
        raise BadBody("the JSON is nested too deeply") from None
    except BadBody:
        raise
    except ValueError as exc:
        raise BadBody(f"invalid JSON: {exc}") from None
    if _SURROGATE.search(text) and _lone_surrogate(value):
        raise BadBody("a string holds a lone UTF-16 surrogate (not valid Unicode)")
    return value


#: Query parameters read as whole numbers; the SDK's 0.3 REST handler calls int() on them.
_WHOLE_PARAMS = ("historyLength", "pageSize")
_WHOLE = re.compile(r"-?[0-9]{1,9}")


def bad_query(query: bytes) -> str | None:
    """What is wrong with a query string's whole-number parameters, or None."""
    for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        if name in _WHOLE_PARAMS and value and not _WHOLE.fullmatch(value):
            return f"query parameter {name} must be a whole number, not {value[:20]!r}"
    return None
