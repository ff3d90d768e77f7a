"""What a stored A2A task and its thread keep of a memory or a session that is forgotten.

A task is stored as the client will read it back (``GetTask``, ``ListTasks``, resubscribe,
the legacy routes): its request (the history's messages) and its artifacts, as the JSON
protobuf prints. A memory tool's task holds copies of memory text — ``memory_add``'s
request, the memory in its artifact, a search's hits, a ``memory_history`` of old texts —
so a task is indexed when it is saved by what it refers to (``references``): the memory ids
in its request and artifacts, the session keys its request names. When a memory or a session
is forgotten, the store rewrites every task referring to it in the same transaction
(``scrub_task``), and the threads of those tasks (``scrub_thread``):

- every message of a task that held it (its request) keeps its tool name and identifiers;
  its texts become ``FORGOTTEN`` and its arguments ``{}`` (a search's query and an add's
  content alike: they described what is forgotten);
- in the artifacts, every object naming a forgotten memory (``"id"`` or ``"memory_id"``) and
  holding its text (content, metadata, a history event's) is replaced by
  ``{"id": ..., "deleted": true}`` in its place (the other hits stay as they were); a prompt
  assembled with its text (``context_prompt``'s, whose ``memory_ids`` name it) reads
  ``FORGOTTEN`` (its other fields stay); a task
  referring to a forgotten session has its artifacts' data replaced by
  ``{"forgotten": true}``. A task that held no such text (``memory_delete``'s, a history
  read after the delete) is left as it is;
- the thread's record of the call (its turn) keeps its tool and time, not its arguments or
  result; the session context the thread opened with tombstones the memories as artifacts
  do.

The task's id, context, state, timestamps and the agent's status message stay."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterator
from typing import Any

#: Kinds of reference a task is indexed by.
MEMORY = "memory"
SESSION = "session"
#: What a forgotten text reads as.
FORGOTTEN = "[forgotten]"

_MEMORY_KEYS = ("id", "memory_id")
_MEMORY_LISTS = ("memory_ids",)
_SESSION_KEYS = ("session_key", "session_id")
#: Where an object naming a memory holds its text: a memory's, a history event's.
_TEXT_KEYS = (
    "content",
    "metadata",
    "old_content",
    "new_content",
    "old_metadata",
    "new_metadata",
)
#: Identifiers a request keeps when it is scrubbed (lamina.threads.service.IDENTIFIERS but
#: the session's, which is what may be forgotten).
_KEPT = frozenset({"user_id", "agent_id", "project_id", "team_id", "org_id", "company_id"})


def link_key(kind: str, ref: str) -> int:
    """The 64-bit key a task's reference is indexed by: the first 8 bytes of the SHA-256 of
    ``kind:ref``, as a signed integer (the PostgreSQL migration 22 computes the same)."""
    digest = hashlib.sha256(f"{kind}:{ref}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def references(data: str) -> set[tuple[str, str]]:
    """The (kind, id) pairs the task (its JSON) refers to: memory ids in its request's data
    parts and its artifacts, session keys its request names (data parts or metadata)."""
    if '"data"' not in data and "session_" not in data:  # no data part, no metadata key
        return set()
    task = json.loads(data)
    if not isinstance(task, dict):
        return set()
    out: set[tuple[str, str]] = set()
    for message in _messages(task):
        for value in _data_parts(message):
            out.update(_refs(value, sessions=True))
        metadata = message.get("metadata")
        if isinstance(metadata, dict):
            out.update((SESSION, v) for k, v in metadata.items() if k in _SESSION_KEYS and _id(v))
    for artifact in _list(task.get("artifacts")):
        if isinstance(artifact, dict):
            for value in _data_parts(artifact):
                out.update(_refs(value, sessions=False))
    return out


def scrub_task(data: str, memories: Collection[str], sessions: Collection[str]) -> str | None:
    """The task (its JSON) without what it held of the forgotten ``memories`` (ids) and
    ``sessions`` (keys); None when it held none of their text (a ``memory_delete``'s task,
    a history without texts); see the module's docstring."""
    task = json.loads(data)
    if not isinstance(task, dict):
        return None
    refs = references(data)
    whole = any((SESSION, key) in refs for key in sessions)
    held = whole
    for artifact in _list(task.get("artifacts")):
        if not isinstance(artifact, dict):
            continue
        for part in _list(artifact.get("parts")):
            if not isinstance(part, dict) or "data" not in part:
                continue
            dropped = {"forgotten": True} if whole else _drop(part["data"], memories)
            held = held or dropped != part["data"]
            part["data"] = dropped
    if not held:
        return None
    for artifact in _list(task.get("artifacts")):
        for part in _list(artifact.get("parts") if isinstance(artifact, dict) else None):
            if isinstance(part, dict) and "text" in part:
                part["text"] = FORGOTTEN
    for message in _list(task.get("history")):
        if isinstance(message, dict):
            for part in _list(message.get("parts")):
                if isinstance(part, dict):
                    _scrub_request_part(part)
    return json.dumps(task, ensure_ascii=False, separators=(",", ":"))


def scrub_thread(context: str, task_ids: Collection[str], memories: Collection[str]) -> str | None:
    """The thread's conversation context (its JSON) with the turns of ``task_ids`` keeping
    only their tool and time, and the forgotten ``memories`` tombstoned in its session
    context; None when nothing changed."""
    value = json.loads(context)
    if not isinstance(value, dict):
        return None
    changed = False
    for turn in _list(value.get("turns")):
        if (
            isinstance(turn, dict)
            and turn.get("task") in task_ids
            and (turn.get("arguments") != {} or turn.get("result") != FORGOTTEN)
        ):
            turn["arguments"], turn["result"] = {}, FORGOTTEN
            changed = True
    if "session_context" in value:
        dropped = _drop(value["session_context"], memories)
        changed = changed or dropped != value["session_context"]
        value["session_context"] = dropped
    if not changed:
        return None
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _scrub_request_part(part: dict[str, Any]) -> None:
    if "text" in part:
        part["text"] = FORGOTTEN
    data = part.get("data")
    if isinstance(data, dict):
        kept: dict[str, Any] = {k: v for k, v in data.items() if k in _KEPT}
        if "tool" in data:
            kept["tool"] = data["tool"]
            kept["arguments"] = {}
        part["data"] = kept
    elif "data" in part:
        part["data"] = {}


def _drop(value: Any, memories: Collection[str]) -> Any:
    """``value`` with every object naming one of ``memories`` and holding text of it (its
    content, metadata, or a history event's) replaced by a tombstone."""
    if isinstance(value, dict):
        named_all = value.get("memory_ids")
        if (
            isinstance(named_all, list)
            and value.get("prompt") not in (None, FORGOTTEN)
            and any(m in memories for m in named_all if isinstance(m, str))
        ):
            # A prompt assembled with the memory's text (context_prompt): forgotten whole.
            return {**value, "prompt": FORGOTTEN}
        for key in _MEMORY_KEYS:
            named = value.get(key)
            if (
                isinstance(named, str)
                and named in memories
                and any(value.get(k) is not None for k in _TEXT_KEYS)
            ):
                return {key: named, "deleted": True}
        return {k: _drop(v, memories) for k, v in value.items()}
    if isinstance(value, list):
        return [_drop(v, memories) for v in value]
    return value


def _refs(value: Any, *, sessions: bool) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _MEMORY_KEYS and _id(item):
                yield MEMORY, item
            elif key in _MEMORY_LISTS and isinstance(item, list):
                yield from ((MEMORY, v) for v in item if _id(v))
            elif sessions and key in _SESSION_KEYS and _id(item):
                yield SESSION, item
            else:
                yield from _refs(item, sessions=sessions)
    elif isinstance(value, list):
        for item in value:
            yield from _refs(item, sessions=sessions)


def _id(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 256


def _messages(task: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for message in _list(task.get("history")):
        if isinstance(message, dict):
            yield message


def _data_parts(holder: dict[str, Any]) -> Iterator[Any]:
    for part in _list(holder.get("parts")):
        if isinstance(part, dict) and "data" in part:
            yield part["data"]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
