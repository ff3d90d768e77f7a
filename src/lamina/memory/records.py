"""The export format of memories (JSON Lines, one memory a line) and its reading back, with
the importer of mem0's memories; docs/export.md describes both.

A record is written from the memory's fields in ONE place, ``export_record``: every field of
``MemoryEntry`` but the tenant and the derived ones, so a field added to the entry is
exported (and read back by ``parse_record``) without touching this module.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from lamina.checks import check_content, check_id, check_metadata, first_error, invalid
from lamina.errors import LaminaError
from lamina.memory.layers import Identifiers, MemoryLayer, parse_layer, scope_for
from lamina.memory.models import HistoryEvent, HistoryOperation, MemoryEntry
from lamina.memory.ports import StoredMemory

#: Entry fields a record leaves out: the tenant (a record moves between tenants) and what
#: the store derives.
_LEFT_OUT = frozenset({"tenant_id", "embedding_generated", "violations", "deduplicated", "facts"})
#: The optional times of an entry (lamina.memory.timing), read back in UTC.
_TIMES = ("event_at", "valid_from", "valid_until", "expires_at")
#: Record keys beside the entry's fields.
_EXTRA = frozenset({"embedding", "history"})
#: The keys a record may have.
_KNOWN = frozenset(MemoryEntry.model_fields) - _LEFT_OUT | _EXTRA
#: Ids of records that carry none: the same record always gets the same id (re-import
#: does not duplicate it).
_ID_SPACE = uuid.UUID("5b0f6d1c-3a1e-4d7e-9c55-8e1f3f0a2b6d")


def export_record(item: StoredMemory) -> dict[str, Any]:
    """The record of a memory: its fields, ``embedding`` (base64 of little-endian float32)
    when its vector was read, ``history`` (its events, oldest first) when that was."""
    record = item.entry.model_dump(mode="json", exclude=set(_LEFT_OUT))
    if item.vector is not None:
        raw = np.asarray(item.vector, dtype="<f4").tobytes()
        record["embedding"] = base64.b64encode(raw).decode("ascii")
    if item.history is not None:
        record["history"] = [e.model_dump(mode="json", exclude={"memory_id"}) for e in item.history]
    return record


def dump_record(record: Mapping[str, Any]) -> str:
    """One JSONL line (without its newline)."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def _fail(line: int, message: str, field: str | None = None) -> LaminaError:
    where = f" ({field})" if field else ""
    return invalid(f"line {line}{where}: {message}", field, line=line)


def parse_line(text: str, line: int) -> dict[str, Any]:
    """A JSONL line as an object, or INVALID_ARGUMENT naming the line."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(line, f"not valid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise _fail(line, "a record must be a JSON object")
    return data


def parse_record(
    data: Mapping[str, Any],
    line: int,
    *,
    tenant_id: str,
    max_length: int,
    model: str,
    dimensions: int,
    checked: bool = False,
) -> StoredMemory:
    """A checked memory of an export record (INVALID_ARGUMENT naming the line and field
    otherwise). Its vector is kept when it is of ``model`` and ``dimensions``, else None
    (the importer embeds the content). ``checked``: the same record was accepted before
    (the importer's second pass), so the checks that only refuse are skipped."""
    if checked:
        content, layer = data["content"], parse_layer(data["layer"])
        identifiers = {n: data["identifiers"][n] for n in layer.required_identifiers}
        metadata = dict(data.get("metadata") or {})
        if isinstance(metadata.get("tags"), list):  # as check_metadata leaves them
            metadata["tags"] = list(dict.fromkeys(metadata["tags"]))
    else:
        unknown = sorted(set(data) - _KNOWN)
        if unknown:
            raise _fail(line, f"unknown field(s): {', '.join(unknown)}", unknown[0])
        try:
            content = check_content(data.get("content"), max_length)
            layer = parse_layer(_required(data, "layer", line))
            identifiers = _identifiers(data.get("identifiers"), layer, line)
            metadata = check_metadata(data.get("metadata") or {})
            if data.get("id") is not None:
                check_id(data["id"])
        except LaminaError as exc:
            raise _fail(line, exc.message, str(exc.details.get("field") or "")) from None
    memory_id = data.get("id") or str(
        uuid.uuid5(_ID_SPACE, json.dumps([layer, identifiers, content]))
    )
    created = _time(data.get("created_at"), None, "created_at", line) or datetime.now(UTC)
    updated = data.get("updated_at")
    fields = {
        **{k: v for k, v in data.items() if k not in _EXTRA},
        "id": memory_id,
        "tenant_id": tenant_id,
        "layer": layer,
        "identifiers": identifiers,
        "content": content,
        "metadata": metadata,
        "created_at": created,
        # The same text is the same time (an export writes updated_at = created_at often).
        "updated_at": created
        if updated is not None and updated == data.get("created_at")
        else _time(updated, created, "updated_at", line),
        **{name: _time(data.get(name), None, name, line) for name in _TIMES},
        "embedding_generated": False,
    }
    if checked:
        # Every value is already of its field's type (the check built this entry from the
        # same record): made as validation would have left it, without validating again.
        entry = _trusted(MemoryEntry, fields, _entry_defaults())
        vector = _vector(data.get("embedding"), line, checked=True)
        events = _checked_history(data.get("history"), memory_id)
    else:
        try:
            entry = MemoryEntry.model_validate(fields)
        except ValidationError as exc:
            where, message = first_error(exc)
            raise _fail(line, message, where) from None
        vector = _vector(data.get("embedding"), line)
        events = _history(data.get("history"), memory_id, line)
    if vector is not None and (entry.embedding_model != model or len(vector) != dimensions):
        vector = None
    return StoredMemory(entry, vector, events)


def _time(value: object, default: datetime | None, field: str, line: int) -> datetime | None:
    """An ISO-8601 time in UTC, as every store keeps it (without a zone: UTC)."""
    if value is None:
        return default
    if not isinstance(value, str):
        raise _fail(line, "a time must be ISO-8601 text", field)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise _fail(line, f"not an ISO-8601 time: {value[:40]!r}", field) from None
    return parsed.astimezone(UTC) if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _required(data: Mapping[str, Any], name: str, line: int) -> Any:
    if data.get(name) is None:
        raise _fail(line, f"{name} is required", name)
    return data[name]


def _identifiers(value: object, layer: MemoryLayer, line: int) -> dict[str, str]:
    """Exactly the identifiers scoping ``layer``."""
    if not isinstance(value, dict):
        raise _fail(line, "identifiers must be an object", "identifiers")
    try:
        ids = Identifiers.model_validate(value)
    except ValidationError as exc:
        where, message = first_error(exc, "identifiers")
        raise _fail(line, message, where) from None
    scope = scope_for(layer, ids)
    extra = sorted(set(ids.given()) - set(scope))
    if extra:
        raise _fail(
            line, f"layer '{layer.value}' is scoped by {', '.join(scope)} only", "identifiers"
        )
    return scope


def _vector(value: object, line: int, *, checked: bool = False) -> np.ndarray[Any, Any] | None:
    """The float32 vector of base64 text (``checked``: accepted before, only decoded)."""
    if value is None:
        return None
    if checked:
        return np.frombuffer(binascii.a2b_base64(value), dtype="<f4")  # type: ignore[arg-type]
    if not isinstance(value, str):
        raise _fail(line, "embedding must be base64 text", "embedding")
    try:
        # Strict: only the alphabet, padding only at the end (as b64decode(validate=True)).
        raw = binascii.a2b_base64(value, strict_mode=True)
    except (binascii.Error, ValueError):
        raise _fail(line, "embedding is not valid base64", "embedding") from None
    if not raw or len(raw) % 4:
        raise _fail(line, "embedding must hold float32 values", "embedding")
    vector = np.frombuffer(raw, dtype="<f4")
    if not np.isfinite(np.add.reduce(vector)):  # a NaN or an infinity anywhere makes the sum one
        raise _fail(line, "embedding holds values that are not finite", "embedding")
    return vector


def _history(value: object, memory_id: str, line: int) -> list[HistoryEvent] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise _fail(line, "history must be a list of events", "history")
    events = []
    for i, event in enumerate(value):
        if not isinstance(event, dict) or "memory_id" in event:
            raise _fail(line, "an event is an object without memory_id", f"history.{i}")
        at = event.get("at")
        if at is not None:
            at = _time(at, datetime.now(UTC), f"history.{i}.at", line)
        try:
            events.append(HistoryEvent.model_validate({**event, "memory_id": memory_id, "at": at}))
        except ValidationError as exc:
            where, message = first_error(exc, "history", i)
            raise _fail(line, message, where) from None
    return events


def _checked_history(value: Any, memory_id: str) -> list[HistoryEvent] | None:
    """``_history`` of a record accepted before: every event is an object holding every
    field of HistoryEvent but memory_id, of its type (``at`` ISO-8601 text)."""
    if value is None:
        return None
    return [
        _trusted(
            HistoryEvent,
            {
                "memory_id": memory_id,
                "operation": HistoryOperation(e["operation"]),
                "at": _time(e["at"], None, "at", 0),
                "layer": MemoryLayer(e["layer"]),
                "old_content": e["old_content"],
                "new_content": e["new_content"],
                "old_metadata": e["old_metadata"],
                "new_metadata": e["new_metadata"],
                "actor": e["actor"],
            },
        )
        for e in value
    ]


def _entry_defaults() -> dict[str, Any]:
    """The entry fields a record may leave out, at their defaults."""
    return {"embedding_model": None, "violations": [], "deduplicated": False, "facts": None}


_Model = TypeVar("_Model", bound=BaseModel)


@cache
def _field_names(model: type[BaseModel]) -> frozenset[str]:
    return frozenset(model.model_fields)


def _trusted(
    model: type[_Model], values: dict[str, Any], defaults: dict[str, Any] | None = None
) -> _Model:
    """``model.model_construct(**values)`` for ``values`` of the model's fields, each
    already of its type, the fields left out taken from ``defaults``. When that covers
    every field (the import's second pass: an entry and its events per record), without
    model_construct's look-up of each field's aliases and default (~15 µs an entry); else
    model_construct itself."""
    given = set(values)
    if defaults:
        values = {**defaults, **values}
    if values.keys() != _field_names(model):
        return model.model_construct(given, **values)
    item = model.__new__(model)
    object.__setattr__(item, "__dict__", values)
    object.__setattr__(item, "__pydantic_fields_set__", given)
    object.__setattr__(item, "__pydantic_extra__", None)
    object.__setattr__(item, "__pydantic_private__", None)
    return item


# -- mem0 ---------------------------------------------------------------------------------

#: mem0 fields kept under ``metadata["mem0"]`` (lamina has no column of its own for them).
_MEM0_KEPT = ("hash", "categories", "actor_id", "role", "app_id", "expiration_date", "immutable")


def from_mem0(item: Mapping[str, Any], line: int) -> dict[str, Any]:
    """A lamina record of one mem0 memory (``Memory.get_all()["results"]`` items, the
    platform's ``get_all`` items, or their JSONL): ``memory`` is the content, ``id``,
    ``metadata``, ``created_at`` and ``updated_at`` are kept; ``user_id`` + ``agent_id``
    make an agent memory, ``user_id`` + ``run_id`` a session memory (the run is the
    session), ``user_id`` alone a user memory; other mem0 fields go to
    ``metadata["mem0"]``. mem0 memories without a user have no lamina layer: refused."""
    user, agent, run = item.get("user_id"), item.get("agent_id"), item.get("run_id")
    if user is None:
        raise _fail(line, "a mem0 memory without user_id has no lamina layer", "user_id")
    if agent is not None:
        layer, identifiers = "agent", {"agent_id": agent, "user_id": user}
    elif run is not None:
        layer, identifiers = "session", {"session_id": run, "user_id": user}
    else:
        layer, identifiers = "user", {"user_id": user}
    metadata = item.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise _fail(line, "metadata must be an object", "metadata")
    kept = {k: item[k] for k in _MEM0_KEPT if item.get(k) is not None}
    if agent is not None and run is not None:
        kept["run_id"] = run
    record: dict[str, Any] = {
        "id": item.get("id"),
        "layer": layer,
        "identifiers": identifiers,
        "content": item.get("memory"),
        "metadata": {**metadata, **({"mem0": kept} if kept else {})},
    }
    for name in ("created_at", "updated_at"):
        if item.get(name) is not None:
            record[name] = item[name]
    return record
