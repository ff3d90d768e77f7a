"""Checks of caller input that every service shares. Each returns the value to use or raises
LaminaError: INVALID_ARGUMENT naming the argument in ``details["field"]``, CONTENT_TOO_LONG or
QUERY_TOO_LONG for lengths. Strings never carry NUL characters or lone surrogates. The tenant
and the scope identifiers (``check_tenant``, ``check_identifier``) name theirs in
``details["identifier"]``, MISSING_IDENTIFIER when blank."""

from __future__ import annotations

import json
import math
import re
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import ValidationError

from lamina.errors import ErrorCode, LaminaError

S = TypeVar("S", bound=StrEnum)

MAX_ID_LENGTH = 256
MAX_IDENTIFIER_LENGTH = 256
MAX_KEY_LENGTH = 256
MAX_METADATA_BYTES = 65_536


def invalid(message: str, field: str | None = None, **details: Any) -> LaminaError:
    """INVALID_ARGUMENT; ``field`` (the argument at fault) goes into ``details``."""
    if field is not None:
        details = {"field": field, **details}
    return LaminaError(ErrorCode.INVALID_ARGUMENT, message, details=details)


def first_error(exc: ValidationError, *prefix: str | int) -> tuple[str, str]:
    """Where the first error of a pydantic validation stands (its location dotted after
    ``prefix``; empty for the whole value) and its message."""
    first = exc.errors()[0]
    return ".".join(str(p) for p in (*prefix, *first["loc"])), first["msg"]


def too_long(
    name: str,
    actual: int,
    max_length: int,
    *,
    code: ErrorCode = ErrorCode.CONTENT_TOO_LONG,
    **details: Any,
) -> LaminaError:
    return LaminaError(
        code,
        f"{name} is {actual} characters; the maximum is {max_length}",
        details={**details, "max_length": max_length},
    )


def _unicode(name: str, value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid(f"{name} is not valid Unicode (lone surrogate)", name) from None
    return value


def storable(value: str) -> bool:
    """Whether every store can hold ``value``: valid Unicode without NUL characters (which
    PostgreSQL text cannot hold). An id that is not can name nothing stored."""
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_string(name: str, value: object) -> str:
    """Required text: a string with more than whitespace in it."""
    if not isinstance(value, str):
        raise invalid(f"{name} must be a string, got {type(value).__name__}", name)
    if not value.strip():
        raise invalid(f"{name} is empty", name)
    if "\x00" in value:
        raise invalid(f"{name} contains a NUL character", name)
    return _unicode(name, value)


def check_content(content: object, max_length: int) -> str:
    text = check_string("content", content)
    if len(text) > max_length:
        raise too_long("content", len(text), max_length, length=len(text))
    return text


def check_query(query: object, max_length: int) -> str:
    text = check_string("query", query)
    if len(text) > max_length:
        raise too_long(
            "query", len(text), max_length, code=ErrorCode.QUERY_TOO_LONG, length=len(text)
        )
    return text


def check_text(name: str, value: object, max_length: int, *, required: bool = False) -> str:
    """Optional text (None is ""): a string of at most ``max_length`` characters;
    ``required``: not blank either."""
    if value is None:
        value = ""
    if not isinstance(value, str) or "\x00" in value:
        raise invalid(f"{name} must be a string without NUL characters", name)
    _unicode(name, value)
    if required and not value.strip():
        raise invalid(f"{name} must not be empty", name)
    if len(value) > max_length:
        raise too_long(name, len(value), max_length, field=name)
    return value


def check_key(
    name: str, value: object, *, strip: bool = True, max_length: int = MAX_KEY_LENGTH
) -> str:
    """A key or a name: a non-blank string of at most ``max_length`` characters (stripped
    unless ``strip`` is False)."""
    if not isinstance(value, str) or not value.strip():
        raise invalid(f"{name} must be a non-empty string", name)
    if len(value) > max_length or "\x00" in value:
        raise invalid(f"{name} must be at most {max_length} characters, without NUL", name)
    _unicode(name, value)
    return value.strip() if strip else value


def check_id(value: object) -> str:
    """The ``id`` of a stored thing (a memory)."""
    if not isinstance(value, str) or not value.strip():
        raise invalid("id must be a non-empty string", "id")
    if len(value) > MAX_ID_LENGTH:
        raise invalid(f"id is longer than {MAX_ID_LENGTH} characters", "id")
    if not storable(value):
        raise invalid("id must be valid Unicode text without NUL characters", "id")
    return value


_CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


def check_identifier(name: str, value: object) -> str:
    """A tenant or scope identifier (``name``: tenant_id, user_id, …): a non-blank string of at
    most MAX_IDENTIFIER_LENGTH characters without control characters, kept as given."""
    if not isinstance(value, str):
        raise LaminaError(
            ErrorCode.INVALID_ARGUMENT,
            f"{name} must be a string, got {type(value).__name__}",
            details={"identifier": name},
        )
    if not value.strip():
        raise LaminaError(
            ErrorCode.MISSING_IDENTIFIER,
            f"{name} is empty",
            details={"identifier": name},
        )
    if len(value) > MAX_IDENTIFIER_LENGTH or _CONTROL_CHARACTERS.search(value):
        raise LaminaError(
            ErrorCode.INVALID_ARGUMENT,
            f"{name} must be at most {MAX_IDENTIFIER_LENGTH} characters without control characters",
            details={"identifier": name, "max_length": MAX_IDENTIFIER_LENGTH},
        )
    return value


def check_tenant(tenant_id: object) -> str:
    """The tenant a call acts for (every service and the threads check it)."""
    return check_identifier("tenant_id", tenant_id)


def check_actor(actor: object) -> str | None:
    if actor is None:
        return None
    if not isinstance(actor, str) or len(actor) > MAX_ID_LENGTH:
        raise invalid(f"actor must be a string of at most {MAX_ID_LENGTH} characters")
    return actor


def check_choice(name: str, value: object, choices: type[S]) -> S:
    """One of the values of an enumeration."""
    try:
        return choices(value)  # type: ignore[arg-type]  # any value: ValueError if not one
    except ValueError:
        valid = [str(c.value) for c in choices]
        raise invalid(
            f"{name} {value!r} is not one of {', '.join(valid)}", name, valid=valid
        ) from None


def check_strings(
    name: str, value: object, *, max_items: int, max_length: int | None = None
) -> list[str]:
    """A list of non-blank strings (None is []), each stripped, duplicates dropped."""
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise invalid(f"{name} must be a list of strings", name)
    if len(value) > max_items or not all(
        isinstance(v, str)
        and v.strip()
        and "\x00" not in v
        and (max_length is None or len(v) <= max_length)
        for v in value
    ):
        each = "" if max_length is None else f" of at most {max_length} characters"
        raise invalid(f"{name} must be at most {max_items} non-empty strings{each}", name)
    return list(dict.fromkeys(_unicode(name, v).strip() for v in value))


def _integer(minimum: int | None, maximum: int | None) -> str:
    if maximum is not None:
        return f"an integer from {minimum if minimum is not None else 0} to {maximum}"
    return {None: "an integer", 0: "a non-negative integer", 1: "a positive integer"}.get(
        minimum, f"an integer of at least {minimum}"
    )


def check_int(
    name: str,
    value: object,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    **details: Any,
) -> int:
    """An integer (not a bool) within the bounds given."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or (minimum is not None and value < minimum)
        or (maximum is not None and value > maximum)
    ):
        raise invalid(f"{name} must be {_integer(minimum, maximum)}", name, **details)
    return value


def check_limit(value: object, *, default: int, maximum: int) -> int:
    """A page size from 1 to ``maximum``; None is ``default``."""
    size = check_int("limit", default if value is None else value)
    if not 1 <= size <= maximum:
        raise invalid(f"limit must be from 1 to {maximum}", "limit")
    return size


def check_cursor(value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise invalid("cursor must be a string from next_cursor", "cursor")
    return value


def check_number(name: str, value: object) -> float:
    """A real number (not a bool, not NaN)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise invalid(f"{name} must be a number", name)
    return float(value)


def check_fraction(name: str, value: object) -> float:
    """A real number in [0, 1] (a score threshold): not a bool, not NaN."""
    number = check_number(name, value)
    if not 0.0 <= number <= 1.0:
        raise invalid(f"{name} must be from 0 to 1, not {number:g}", name)
    return number


def check_flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise invalid(f"{name} must be true or false", name)
    return value


def _check_json(value: Any, path: str) -> None:
    if value is None or isinstance(value, str | bool | int):
        if isinstance(value, str) and not storable(value):
            # PostgreSQL's jsonb holds no NUL; no store holds a lone surrogate.
            raise invalid(f"metadata {path} is not valid Unicode without NUL characters", path)
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise invalid(f"metadata {path} is not a finite number", path)
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_json(item, f"{path}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise invalid(f"metadata keys must be strings (at {path})", path)
            if not storable(key):
                raise invalid(
                    f"metadata keys must be valid Unicode without NUL characters (at "
                    f"{path or 'the top'}: {key!r})",
                    path or "metadata",
                )
            _check_json(item, f"{path}.{key}" if path else key)
        return
    raise invalid(f"metadata {path} has unsupported type {type(value).__name__}", path)


def check_metadata(metadata: object, *, partial: bool = False) -> dict[str, Any]:
    """A JSON object of at most 64 KB; ``tags``, when present, is a list of strings.

    ``partial`` (an update patch) allows ``None`` values, which remove keys.
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise invalid(f"metadata must be an object, got {type(metadata).__name__}")
    _check_json(metadata, "")
    out = dict(metadata)
    tags = out.get("tags")
    if tags is not None or ("tags" in out and not partial):
        if not isinstance(tags, list | tuple) or not all(isinstance(t, str) and t for t in tags):
            raise invalid("metadata.tags must be a list of non-empty strings", "tags")
        out["tags"] = list(dict.fromkeys(tags))
    size = len(json.dumps(out, ensure_ascii=False).encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        raise invalid(
            f"metadata is {size} bytes as JSON; the maximum is {MAX_METADATA_BYTES}",
            max_bytes=MAX_METADATA_BYTES,
        )
    return out


def check_json_object(name: str, value: object) -> dict[str, Any]:
    """A JSON object checked as ``metadata`` is, errors naming ``name``."""
    if value is None:
        return {}
    try:
        return check_metadata(value)
    except LaminaError as exc:
        raise invalid(exc.message.replace("metadata", name), name) from None
