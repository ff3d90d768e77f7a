"""Search and list filters: tags (any of) and metadata fields with operators.

``filters`` maps a metadata field (dotted for nested objects: ``"source.kind"``) to either a
plain value (equality) or an object of operators, all of which must hold::

    {"priority": {"gte": 2, "lt": 5}, "status": "open", "topic": {"in": ["ui", "ux"]}}

Operators: eq, ne, in, contains, gt, gte, lt, lte. ``contains`` means "has this element"
for a list field and "has this substring" for a string field. Fields combine with AND.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lamina.checks import storable
from lamina.errors import ErrorCode, LaminaError

OPERATORS = ("eq", "ne", "in", "contains", "gt", "gte", "lt", "lte")
_FIELD = re.compile(r"^[A-Za-z0-9_\-]{1,64}(\.[A-Za-z0-9_\-]{1,64}){0,7}$")
_MAX_IN = 500
_MAX_TAGS = 100
Scalar = str | int | float | bool | None


@dataclass(frozen=True)
class Condition:
    path: tuple[str, ...]
    op: str
    value: Any


@dataclass(frozen=True)
class MetadataFilter:
    """A validated filter: stores translate it to their own query language."""

    tags: tuple[str, ...] = ()
    conditions: tuple[Condition, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.tags and not self.conditions


def _bad(message: str, **details: Any) -> LaminaError:
    return LaminaError(ErrorCode.INVALID_FILTER, message, details=details)


def _check_scalar(field: str, op: str, value: Any) -> Scalar:
    if value is None or isinstance(value, str | bool | int | float):
        if isinstance(value, float) and value != value:  # NaN never compares
            raise _bad(f"filter {field}.{op}: NaN is not a valid value", field=field, op=op)
        if isinstance(value, str) and not storable(value):
            raise _bad(
                f"filter {field}.{op}: text must be valid Unicode without NUL characters",
                field=field,
                op=op,
            )
        return value
    raise _bad(
        f"filter {field}.{op}: value must be a string, number, boolean or null, "
        f"got {type(value).__name__}",
        field=field,
        op=op,
    )


def _condition(field: str, op: str, value: Any) -> Condition:
    path = tuple(field.split("."))
    if op not in OPERATORS:
        raise _bad(
            f"unknown filter operator {op!r} on {field}; valid: {', '.join(OPERATORS)}",
            field=field,
            op=op,
        )
    if op == "in":
        if not isinstance(value, Sequence) or isinstance(value, str | bytes) or not value:
            raise _bad(f"filter {field}.in needs a non-empty list", field=field, op=op)
        if len(value) > _MAX_IN:
            raise _bad(f"filter {field}.in takes at most {_MAX_IN} values", field=field, op=op)
        return Condition(path, op, tuple(_check_scalar(field, op, v) for v in value))
    scalar = _check_scalar(field, op, value)
    if op in ("gt", "gte", "lt", "lte") and (scalar is None or isinstance(scalar, bool)):
        raise _bad(f"filter {field}.{op} needs a number or a string", field=field, op=op)
    if op == "contains" and scalar is None:
        raise _bad(f"filter {field}.contains needs a value", field=field, op=op)
    return Condition(path, op, scalar)


def parse_filter(
    tags: Sequence[str] | str | None = None, filters: Mapping[str, Any] | None = None
) -> MetadataFilter:
    """Validate ``tags`` and ``filters``; INVALID_FILTER says what is wrong and where."""
    tag_list: tuple[str, ...] = ()
    if tags is not None:
        raw = [tags] if isinstance(tags, str) else list(tags)
        if len(raw) > _MAX_TAGS:
            raise _bad(f"at most {_MAX_TAGS} tags may be given", field="tags")
        for tag in raw:
            if not isinstance(tag, str) or not tag or not storable(tag):
                raise _bad(
                    "tags must be non-empty strings (valid Unicode without NUL characters)",
                    field="tags",
                )
        tag_list = tuple(dict.fromkeys(raw))
    conditions: list[Condition] = []
    if filters is not None:
        if not isinstance(filters, Mapping):
            raise _bad("filters must be an object mapping fields to values or operators")
        for field, spec in filters.items():
            if not isinstance(field, str) or not _FIELD.match(field):
                raise _bad(
                    f"invalid filter field {field!r}: use letters, digits, '_', '-' and '.'",
                    field=str(field),
                )
            if isinstance(spec, Mapping):
                if not spec:
                    raise _bad(f"filter {field}: empty operator object", field=field)
                for op, value in spec.items():
                    conditions.append(_condition(field, str(op), value))
            else:
                conditions.append(_condition(field, "eq", spec))
    return MetadataFilter(tag_list, tuple(conditions))


def _get_path(metadata: Mapping[str, Any], path: tuple[str, ...]) -> tuple[bool, Any]:
    node: Any = metadata
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _compare(op: str, actual: Any, expected: Any) -> bool:
    """Numbers compare with numbers, strings with strings (by code point); nothing else."""
    if isinstance(actual, bool):
        return False
    numeric = isinstance(actual, int | float)
    if not (numeric or isinstance(actual, str)):
        return False
    if numeric != (not isinstance(expected, str)):
        return False
    if op == "gt":
        return bool(actual > expected)
    if op == "gte":
        return bool(actual >= expected)
    if op == "lt":
        return bool(actual < expected)
    return bool(actual <= expected)


def _same(actual: Any, expected: Any) -> bool:
    if isinstance(actual, bool) or isinstance(expected, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
    return bool(actual == expected)


def matches(flt: MetadataFilter, metadata: Mapping[str, Any]) -> bool:
    """The reference semantics every store must agree with (the conformance suite checks)."""
    if flt.tags:
        tags = metadata.get("tags")
        if not isinstance(tags, list) or not any(t in flt.tags for t in tags):
            return False
    for cond in flt.conditions:
        found, actual = _get_path(metadata, cond.path)
        op, value = cond.op, cond.value
        if op == "eq":
            ok = found and _same(actual, value)
        elif op == "ne":
            ok = not (found and _same(actual, value))
        elif op == "in":
            ok = found and any(_same(actual, v) for v in value)
        elif op == "contains":
            if isinstance(actual, list):
                ok = any(_same(item, value) for item in actual)
            else:
                ok = isinstance(actual, str) and isinstance(value, str) and value in actual
        else:
            ok = found and actual is not None and _compare(op, actual, value)
        if not ok:
            return False
    return True
