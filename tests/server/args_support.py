"""Wrong-typed arguments for every server tool, the data they would touch, and a snapshot of
everything stored: what tests/server/test_strict_args.py sends through every A2A route and
through `lamina mcp`, on SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lamina import Lamina
from lamina.config import Settings
from tests.pg import empty_database, require_postgres

SESSION = "chat-1"
BASE = "You are the travel agent."
USER = {"user_id": "alice"}

#: Tables the A2A server writes for every request, accepted or not (tasks, threads).
_BOOKKEEPING = ("a2a_", "thread")


def store_overrides(kind: str) -> dict[str, Any]:
    """The settings of an empty store of ``kind``: nothing (a SQLite file in the data
    directory) or an emptied PostgreSQL database."""
    if kind == "sqlite":
        return {}
    url = require_postgres()
    empty_database(url)
    return {"database_url": url}


STORES = pytest.mark.parametrize("store", ["sqlite", "postgresql"])


def seed(settings: Settings) -> dict[str, str]:
    """What the calls below name, stored through the library: two memories of alice, a
    knowledge item, a session with a message and a base system prompt. Their ids."""
    with Lamina(settings) as ms:
        kept = ms.memory.add("Alice likes aisle seats", layer="user", user_id="alice")
        ms.memory.add("Alice flies on Fridays", layer="user", user_id="alice")
        item = ms.knowledge.create(
            "adr", "Use PostgreSQL", layer="company", summary="One database", body="Why."
        )
        ms.sessions.append(SESSION, "user", "Book me a flight to Lisbon")
        ms.sessions.set_system_prompt(SESSION, BASE)
        ms.memory.register_hierarchy(project_id="atlas", team_id="core")
        return {"memory": kept.id, "item": item.item.id}


def cases(ids: dict[str, str]) -> list[tuple[str, dict[str, Any], str]]:
    """(tool, arguments, the field named): arguments valid but for one value of the wrong
    JSON type, for every tool. Each would change stored data, or read it, if the wrong type
    were taken as a guess."""
    mem, item = ids["memory"], ids["item"]
    message = {"role": "user", "content": "hi"}
    add = {"content": "Alice hates middle seats", "layer": "user", **USER}
    return [
        ("memory_add", {**add, "content": 5}, "content"),
        ("memory_add", {**add, "layer": ["user"]}, "layer"),
        ("memory_add", {**add, "ttl": "60"}, "ttl"),
        ("memory_add", {**add, "ttl": True}, "ttl"),
        ("memory_add", {**add, "dedup": "no"}, "dedup"),
        ("memory_add", {**add, "infer": 0}, "infer"),
        ("memory_add", {**add, "metadata": "seat=aisle"}, "metadata"),
        ("memory_add", {**add, "timestamp": 1700000000}, "timestamp"),
        ("memory_add", {**add, "user_id": 7}, "user_id"),
        ("memory_add_messages", {"messages": "hi", **USER}, "messages"),
        (
            "memory_add_messages",
            {"messages": [{**message, "content": 5}], **USER},
            "messages.0.content",
        ),
        ("memory_add_messages", {"messages": [message], "infer": "false", **USER}, "infer"),
        ("memory_add_messages", {"messages": [message], "ttl": "1h", **USER}, "ttl"),
        ("memory_search", {"query": "seats", "limit": "5", **USER}, "limit"),
        ("memory_search", {"query": "seats", "limit": 2.5, **USER}, "limit"),
        ("memory_search", {"query": "seats", "limit": True, **USER}, "limit"),
        ("memory_search", {"query": "seats", "threshold": "0.5", **USER}, "threshold"),
        ("memory_search", {"query": "seats", "include_invalid": "yes", **USER}, "include_invalid"),
        ("memory_search", {"query": "seats", "layers": "user", **USER}, "layers"),
        ("memory_search", {"query": 5, **USER}, "query"),
        ("memory_get", {"memory_id": 5}, "memory_id"),
        ("memory_update", {"memory_id": mem, "content": 5}, "content"),
        ("memory_update", {"memory_id": mem, "content": "x", "metadata": ["a"]}, "metadata"),
        ("memory_delete", {"memory_id": [mem]}, "memory_id"),
        ("memory_invalidate", {"memory_ids": mem}, "memory_ids"),
        ("memory_invalidate", {"memory_ids": [mem], "at": 1700000000}, "at"),
        ("memory_list", {"limit": "5", **USER}, "limit"),
        ("memory_list", {"include_invalid": 1, **USER}, "include_invalid"),
        ("memory_history", {"memory_id": {"id": mem}}, "memory_id"),
        ("memory_delete_all", {"include_sessions": "yes", **USER}, "include_sessions"),
        ("memory_delete_all", {"include_sessions": 1, **USER}, "include_sessions"),
        ("memory_delete_all", {"layers": "user", **USER}, "layers"),
        ("memory_delete_all", {"user_id": True}, "user_id"),
        ("hierarchy_register", {"project_id": "atlas", "team_id": 5}, "team_id"),
        ("hierarchy_defaults", {"company_id": ["acme"]}, "company_id"),
        ("hierarchy_resolve", {"project_id": 5}, "project_id"),
        ("knowledge_query", {"query": "database", "limit": "5"}, "limit"),
        ("knowledge_query", {"query": 5}, "query"),
        ("knowledge_get", {"id": item, "history": "yes"}, "history"),
        ("knowledge_create", {"type": "adr", "title": 5, "layer": "company"}, "title"),
        (
            "knowledge_create",
            {"type": "adr", "title": "Use Redis", "layer": "company", "tags": "cache"},
            "tags",
        ),
        ("knowledge_update", {"id": item, "summary": 5}, "summary"),
        ("knowledge_status", {"id": item, "status": ["accepted"]}, "status"),
        ("knowledge_history", {"id": item, "limit": "5"}, "limit"),
        ("governance_validate", {"context": "import os"}, "context"),
        ("governance_drift", {"contexts": {"path": "a.py"}}, "contexts"),
        ("governance_policies", {"layer": 5}, "layer"),
        (
            "session_append",
            {"session_key": SESSION, "messages": [{**message, "content": 5}]},
            "messages.0.content",
        ),
        ("session_append", {"session_key": 5, "messages": [message]}, "session_key"),
        (
            "session_append",
            {"session_key": SESSION, "messages": [{**message, "tool_calls": "search"}]},
            "messages.0.tool_calls",
        ),
        ("session_messages", {"session_key": SESSION, "recent": "yes"}, "recent"),
        ("session_messages", {"session_key": SESSION, "start": "0"}, "start"),
        ("session_messages", {"session_key": SESSION, "limit": 1.5}, "limit"),
        ("session_observations", {"session_key": SESSION, "limit": "5"}, "limit"),
        ("session_reflections", {"session_key": SESSION, "limit": False}, "limit"),
        ("session_system_prompt", {"session_key": SESSION, "prompt": 5}, "prompt"),
        ("session_system_prompt", {"session_key": SESSION, "prompt": False}, "prompt"),
        ("context_prompt", {"query": "flights", "base": 5, "session_key": SESSION}, "base"),
        ("context_prompt", {"query": "flights", "layers": "user_knowledge"}, "layers"),
        ("context_prompt", {"query": ["flights"]}, "query"),
    ]


def _rows(cursor: Any, table: str, quote: str) -> list[str]:
    cursor.execute(f"SELECT * FROM {quote}{table}{quote}")
    return sorted(repr(tuple(row)) for row in cursor.fetchall())


def snapshot(settings: Settings) -> dict[str, Any]:
    """Every stored row (but the A2A tasks and threads) and every file of the knowledge
    repositories: equal snapshots, nothing stored, changed or deleted."""
    tables: dict[str, list[str]] = {}
    if settings.store_kind() == "postgresql":
        with psycopg.connect(settings.database_url or "") as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            )
            names = [r[0] for r in cur.fetchall()]
            for name in names:
                if not name.startswith(_BOOKKEEPING):
                    tables[name] = _rows(cur, name, '"')
    else:
        uri = f"file:{settings.sqlite_path()}?mode=ro"
        conn = sqlite3.connect(uri, uri=True)
        try:
            cur = conn.cursor()
            cur.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            for (name,) in cur.fetchall():
                if not name.startswith(_BOOKKEEPING):
                    tables[name] = _rows(cur, name, '"')
        finally:
            conn.close()
    return {"tables": tables, "knowledge": _files(settings.knowledge_path())}


def _files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def counts(shot: dict[str, Any]) -> dict[str, int]:
    """The snapshot's row count per table (for a readable failure)."""
    return {name: len(rows) for name, rows in shot["tables"].items()}


def assert_unchanged(before: dict[str, Any], after: dict[str, Any]) -> None:
    assert counts(after) == counts(before)
    changed = [n for n in before["tables"] if before["tables"][n] != after["tables"].get(n)]
    assert not changed, f"rows changed in {changed}"
    assert after["knowledge"] == before["knowledge"]
    # The seed is there: the comparison is not of two empty stores.
    assert counts(before)["memories"] >= 2 and counts(before)["session_messages"] >= 1


#: How an error names the JSON type it got.
KINDS = {
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "an array",
    dict: "an object",
}


def value_at(arguments: dict[str, Any], field: str) -> Any:
    """The value at ``field`` (``messages.0.content``) of ``arguments``."""
    value: Any = arguments
    for step in field.split("."):
        value = value[int(step)] if isinstance(value, list) else value[step]
    return value


def bad_argument(
    error: dict[str, Any], tool: str, field: str, arguments: dict[str, Any] | None = None
) -> None:
    """``error`` is INVALID_ARGUMENT naming ``field`` and, with ``arguments``, the JSON type
    of its value, without echoing the value."""
    assert error["code"] == "INVALID_ARGUMENT", (tool, field, error)
    assert error["details"]["field"] == field, (tool, field, error)
    assert error["details"]["tool"] == tool
    assert error["message"].startswith(f"{tool}: argument {field}: "), error
    if arguments is None:
        return
    value = value_at(arguments, field)
    got = KINDS[type(value)]
    assert error["details"]["got"] == got and error["message"].endswith(f"(got {got})"), error
    if isinstance(value, str) and len(value) > 3:
        assert value not in error["message"], error
