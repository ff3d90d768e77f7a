"""Checks of caller input that every entry point shares."""

from __future__ import annotations

import json
import math
from typing import Any

from lamina.errors import ErrorCode, LaminaError

MAX_METADATA_BYTES = 65_536
MAX_ID_LENGTH = 256


def _invalid(message: str, **details: Any) -> LaminaError:
    return LaminaError(ErrorCode.INVALID_ARGUMENT, message, details=details)


def _check_text(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise _invalid(f"{name} must be a string, got {type(value).__name__}", field=name)
    if not value.strip():
        raise _invalid(f"{name} is empty", field=name)
    if "\x00" in value:
        raise _invalid(f"{name} contains a NUL character", field=name)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _invalid(f"{name} is not valid Unicode (lone surrogate)", field=name) from None
    return value


def check_content(content: object, max_length: int) -> str:
    text = _check_text("content", content)
    if len(text) > max_length:
        raise LaminaError(
            ErrorCode.CONTENT_TOO_LONG,
            f"content is {len(text)} characters; the maximum is {max_length}",
            details={"max_length": max_length, "length": len(text)},
        )
    return text


def check_query(query: object, max_length: int) -> str:
    text = _check_text("query", query)
    if len(text) > max_length:
        raise LaminaError(
            ErrorCode.QUERY_TOO_LONG,
            f"query is {len(text)} characters; the maximum is {max_length}",
            details={"max_length": max_length, "length": len(text)},
        )
    return text


def check_id(memory_id: object) -> str:
    if not isinstance(memory_id, str) or not memory_id.strip():
        raise _invalid("id must be a non-empty string", field="id")
    if len(memory_id) > MAX_ID_LENGTH:
        raise _invalid(f"id is longer than {MAX_ID_LENGTH} characters", field="id")
    return memory_id


def check_actor(actor: object) -> str | None:
    if actor is None:
        return None
    if not isinstance(actor, str) or len(actor) > MAX_ID_LENGTH:
        raise _invalid(f"actor must be a string of at most {MAX_ID_LENGTH} characters")
    return actor


def _check_json(value: Any, path: str) -> None:
    if value is None or isinstance(value, str | bool | int):
        if isinstance(value, str):
            _check_text_loose(value, path)
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _invalid(f"metadata {path} is not a finite number", field=path)
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_json(item, f"{path}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise _invalid(f"metadata keys must be strings (at {path})", field=path)
            _check_json(item, f"{path}.{key}" if path else key)
        return
    raise _invalid(f"metadata {path} has unsupported type {type(value).__name__}", field=path)


def _check_text_loose(value: str, path: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _invalid(f"metadata {path} is not valid Unicode", field=path) from None


def check_metadata(metadata: object, *, partial: bool = False) -> dict[str, Any]:
    """A JSON object of at most 64 KB; ``tags``, when present, is a list of strings.

    ``partial`` (an update patch) allows ``None`` values, which remove keys.
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise _invalid(f"metadata must be an object, got {type(metadata).__name__}")
    _check_json(metadata, "")
    out = dict(metadata)
    tags = out.get("tags")
    if tags is not None or ("tags" in out and not partial):
        if not isinstance(tags, list | tuple) or not all(isinstance(t, str) and t for t in tags):
            raise _invalid("metadata.tags must be a list of non-empty strings", field="tags")
        out["tags"] = list(dict.fromkeys(tags))
    size = len(json.dumps(out, ensure_ascii=False).encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        raise _invalid(
            f"metadata is {size} bytes as JSON; the maximum is {MAX_METADATA_BYTES}",
            max_bytes=MAX_METADATA_BYTES,
        )
    return out
