"""LangGraph store values as lamina keeps them, and LangGraph's filters over them.

A value is stored as JSON in the memory's metadata. What JSON cannot hold but a LangGraph
value may (``datetime``, ``date``, ``time``, tuples) is stored as JSON (ISO 8601 text, a
list) with its path and type beside it, so ``get`` gives back a value equal to the one
``put`` was given. Anything else that is not JSON is INVALID_ARGUMENT, naming its path.

Filters are LangGraph's (``langgraph.store.memory``): a field equals a value (nested objects
match field by field, lists element by element) or passes every one of its ``$eq $ne $gt
$gte $lt $lte`` operators; the comparisons compare numbers. They are evaluated here on the
value as ``get`` returns it; ``pushdown`` gives the part lamina's metadata filters can
evaluate the same way, to narrow what is read.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from datetime import date, datetime, time
from typing import Any

from lamina.checks import storable
from lamina.errors import ErrorCode, LaminaError

__all__ = ["check_filter", "content", "decode", "encode", "matches", "pushdown"]

#: A path inside a value: object keys and list indexes.
Path = list[str | int]
OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}
_FROM_TEXT: dict[str, Callable[[str], Any]] = {
    "datetime": datetime.fromisoformat,
    "date": date.fromisoformat,
    "time": time.fromisoformat,
}
#: A top-level field name lamina's metadata filters accept.
_FIELD = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")


def _bad(message: str, **details: Any) -> LaminaError:
    return LaminaError(ErrorCode.INVALID_ARGUMENT, message, details=details)


def _where(path: Path) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def encode(value: Mapping[str, Any]) -> tuple[dict[str, Any], list[list[Any]]]:
    """``value`` as JSON, and ``[path, type]`` for each part JSON holds as another type."""
    types: list[list[Any]] = []

    def walk(item: Any, path: Path) -> Any:
        if item is None or isinstance(item, str | bool | int):
            return item
        if isinstance(item, float):
            if not math.isfinite(item):
                raise _bad(f"value {_where(path)}: {item} is not a JSON number", path=path)
            return item
        if isinstance(item, datetime | date | time):
            # datetime before date: a datetime is a date too.
            kind = "datetime" if isinstance(item, datetime) else type(item).__name__
            types.append([path, kind])
            return item.isoformat()
        if isinstance(item, list | tuple):
            if isinstance(item, tuple):
                types.append([path, "tuple"])
            return [walk(x, [*path, i]) for i, x in enumerate(item)]
        if isinstance(item, Mapping):
            out = {}
            for key, x in item.items():
                if not isinstance(key, str):
                    raise _bad(
                        f"value {_where(path) or '(top)'}: keys must be strings, got {key!r}",
                        path=path,
                    )
                out[key] = walk(x, [*path, key])
            return out
        raise _bad(
            f"value {_where(path)}: a {type(item).__name__} cannot be stored (JSON values, "
            "datetime, date, time and tuples can)",
            path=path,
        )

    return walk(value, []), types


def decode(value: dict[str, Any], types: list[list[Any]] | None) -> dict[str, Any]:
    """The value ``encode`` was given, from what it returned (deepest parts first)."""
    if not types:
        return value
    out: Any = json.loads(json.dumps(value))  # a copy: the stored metadata stays as it is
    for path, kind in sorted(types, key=lambda t: -len(t[0])):
        if not path:
            continue
        parent = out
        for part in path[:-1]:
            parent = parent[part]
        item = parent[path[-1]]
        parent[path[-1]] = tuple(item) if kind == "tuple" else _FROM_TEXT[kind](item)
    return dict(out)


def content(value: Mapping[str, Any], encoded: dict[str, Any]) -> str:
    """The memory's text: the value's ``content`` (or ``text``) when it is text, else the
    value as JSON."""
    for field in ("content", "text"):
        text = value.get(field)
        if isinstance(text, str) and text.strip():
            return text
    return json.dumps(encoded, sort_keys=True, ensure_ascii=False)


def check_filter(wanted: Mapping[str, Any] | None) -> None:
    """INVALID_FILTER for an operator LangGraph does not have."""

    def walk(condition: Any, field: str) -> None:
        if isinstance(condition, Mapping):
            if any(isinstance(k, str) and k.startswith("$") for k in condition):
                unknown = sorted(str(k) for k in condition if k not in OPERATORS)
                if unknown:
                    raise LaminaError(
                        ErrorCode.INVALID_FILTER,
                        f"filter {field}: unknown operator(s) {unknown}; valid: "
                        f"{sorted(OPERATORS)}",
                        details={"field": field},
                    )
                return
            for key, inner in condition.items():
                walk(inner, f"{field}.{key}")

    if wanted is not None and not isinstance(wanted, Mapping):
        raise LaminaError(ErrorCode.INVALID_FILTER, "a filter must be an object")
    for field, condition in (wanted or {}).items():
        walk(condition, str(field))


def matches(value: Mapping[str, Any], wanted: Mapping[str, Any] | None) -> bool:
    """Whether ``value`` passes LangGraph's ``filter`` (checked by ``check_filter``). A
    comparison with a value that is not a number does not match."""
    return all(_compare(value.get(k), c) for k, c in (wanted or {}).items())


def _compare(item: Any, condition: Any) -> bool:
    if isinstance(condition, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in condition):
            return all(_operator(item, op, operand) for op, operand in condition.items())
        if not isinstance(item, Mapping):
            return False
        return all(_compare(item.get(k), c) for k, c in condition.items())
    if isinstance(condition, list | tuple):
        return (
            isinstance(item, list | tuple)
            and len(item) == len(condition)
            and all(_compare(i, c) for i, c in zip(item, condition, strict=True))
        )
    return bool(item == condition)


def _operator(item: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(item == operand)
    if op == "$ne":
        return bool(item != operand)
    try:
        return _COMPARE[op](float(item), float(operand))
    except (TypeError, ValueError):
        return False


def pushdown(wanted: Mapping[str, Any] | None, prefix: str) -> dict[str, Any]:
    """The conditions of ``wanted`` that lamina's metadata filters (fields under
    ``prefix``) evaluate exactly as LangGraph does: a top-level field equal to a string."""
    out: dict[str, Any] = {}
    for field, condition in (wanted or {}).items():
        if not isinstance(field, str) or not _FIELD.match(field):
            continue
        if isinstance(condition, Mapping) and set(condition) == {"$eq"}:
            condition = condition["$eq"]
        # (text no store holds is in no stored value: left to the check here)
        if isinstance(condition, str) and storable(condition):
            out[f"{prefix}.{field}"] = condition
    return out
