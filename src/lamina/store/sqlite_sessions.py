"""Sessions and observational memory (store/session_base.py) in the SQLite file."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from lamina.errors import ErrorCode, LaminaError
from lamina.store.session_base import (
    NewMessage,
    StoredMessage,
    StoredNote,
    normalise_entity,
)
from lamina.store.sqlite_db import Database

Runner = Callable[..., Awaitable[Any]]
SUMMARY_PREFIX = "[Compacted Summary]\n"

_MSG = "session_key, idx, role, content, tool_calls, token_count, created_at"
_OBS = "id, session_key, content, token_count, 0, source_start, source_end, created_at"
_REF = "id, session_key, content, token_count, generation, source_start, source_end, created_at"


def _ts(value: datetime) -> str:
    return value.isoformat(timespec="microseconds")


def _message(row: Sequence[Any]) -> StoredMessage:
    return StoredMessage(
        row[0], row[1], row[2], row[3], json.loads(row[4]), row[5], datetime.fromisoformat(row[6])
    )


def _note(row: Sequence[Any]) -> StoredNote:
    return StoredNote(
        row[0], row[1], row[2], row[3], row[4], row[5], row[6], datetime.fromisoformat(row[7])
    )


class SQLiteSessions:
    def __init__(self, db: Database, run: Runner) -> None:
        self._db = db
        self._run = run

    async def append_messages(
        self, tenant_id: str, session_key: str, messages: Sequence[NewMessage]
    ) -> list[StoredMessage]:
        out: list[StoredMessage] = await self._run(
            "append", self._append, tenant_id, session_key, list(messages)
        )
        return out

    def _append(
        self, tenant_id: str, session_key: str, messages: list[NewMessage]
    ) -> list[StoredMessage]:
        now = datetime.now(UTC)
        with self._db.write() as conn:
            top = conn.execute(
                "SELECT max(idx) FROM session_messages WHERE tenant_id = ? AND session_key = ?",
                (tenant_id, session_key),
            ).fetchone()[0]
            start = -1 if top is None else top
            rows = [
                (
                    tenant_id,
                    session_key,
                    start + 1 + i,
                    m.role,
                    m.content,
                    json.dumps(m.tool_calls, ensure_ascii=False),
                    m.token_count,
                    _ts(m.created_at or now),
                )
                for i, m in enumerate(messages)
            ]
            conn.executemany(
                "INSERT INTO session_messages (tenant_id, session_key, idx, role, content, "
                "tool_calls, token_count, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        return [_message(r[1:]) for r in rows]

    async def list_messages(
        self, tenant_id: str, session_key: str, *, start: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        def read() -> list[StoredMessage]:
            rows = (
                self._db.connection()
                .execute(
                    f"SELECT {_MSG} FROM session_messages WHERE tenant_id = ? "  # noqa: S608
                    "AND session_key = ? AND idx >= ? ORDER BY idx LIMIT ?",
                    (tenant_id, session_key, start, -1 if limit is None else limit),
                )
                .fetchall()
            )
            return [_message(r) for r in rows]

        out: list[StoredMessage] = await self._run("list messages", read)
        return out

    async def compact_messages(
        self, tenant_id: str, session_key: str, up_to_index: int, summary: str, tokens: int
    ) -> StoredMessage:
        out: StoredMessage = await self._run(
            "compact", self._compact, tenant_id, session_key, up_to_index, summary, tokens
        )
        return out

    def _compact(
        self, tenant_id: str, session_key: str, up_to: int, summary: str, tokens: int
    ) -> StoredMessage:
        key = (tenant_id, session_key)
        with self._db.write() as conn:
            count = conn.execute(
                "SELECT count(*) FROM session_messages WHERE tenant_id = ? AND session_key = ?",
                key,
            ).fetchone()[0]
            if up_to < 0 or (up_to >= count and not (up_to == 0 and count == 0)):
                raise LaminaError(
                    ErrorCode.INVALID_ARGUMENT,
                    f"up_to_index {up_to} is out of range: the session has {count} message(s)",
                    details={"up_to_index": up_to, "messages": count},
                )
            conn.execute(
                "DELETE FROM session_messages WHERE tenant_id = ? AND session_key = ? AND idx <= ?",
                (*key, up_to),
            )
            first = conn.execute(
                "SELECT min(created_at) FROM session_messages WHERE tenant_id = ? "
                "AND session_key = ?",
                key,
            ).fetchone()[0]
            # Renumber the rest from 1 in two steps (negative first: no unique clash).
            shift = up_to if count else 0
            conn.execute(
                "UPDATE session_messages SET idx = -idx WHERE tenant_id = ? AND session_key = ?",
                key,
            )
            conn.execute(
                "UPDATE session_messages SET idx = -idx - ? WHERE tenant_id = ? "
                "AND session_key = ?",
                (shift, *key),
            )
            for table in ("observations", "reflections"):
                conn.execute(
                    f"UPDATE {table} SET source_start = CASE WHEN source_end <= ? THEN 0 "  # noqa: S608
                    "ELSE max(source_start - ?, 1) END, source_end = CASE WHEN source_end <= ? "
                    "THEN 0 ELSE source_end - ? END WHERE tenant_id = ? AND session_key = ?",
                    (up_to, shift, up_to, shift, *key),
                )
            dated = (
                datetime.fromisoformat(first) - timedelta(milliseconds=1)
                if first
                else datetime.now(UTC)
            )
            row = (session_key, 0, "system", SUMMARY_PREFIX + summary, "[]", tokens, _ts(dated))
            conn.execute(
                "INSERT INTO session_messages (tenant_id, session_key, idx, role, content, "
                "tool_calls, token_count, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (tenant_id, *row),
            )
        return _message(row)

    async def add_note(
        self,
        tenant_id: str,
        session_key: str,
        content: str,
        tokens: int,
        generation: int,
        source: tuple[int, int],
        *,
        replaces: Sequence[str] = (),
    ) -> StoredNote:
        note = StoredNote(
            str(uuid.uuid4()),
            session_key,
            content,
            tokens,
            generation,
            source[0],
            source[1],
            datetime.now(UTC),
        )

        def write() -> None:
            with self._db.write() as conn:
                if generation == 0:
                    conn.execute(
                        "INSERT INTO observations (tenant_id, session_key, id, content, "
                        "token_count, source_start, source_end, created_at) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            tenant_id,
                            session_key,
                            note.id,
                            content,
                            tokens,
                            *source,
                            _ts(note.created_at),
                        ),
                    )
                else:
                    conn.execute(
                        "INSERT INTO reflections (tenant_id, session_key, id, content, "
                        "token_count, generation, source_start, source_end, created_at) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            tenant_id,
                            session_key,
                            note.id,
                            content,
                            tokens,
                            generation,
                            *source,
                            _ts(note.created_at),
                        ),
                    )
                for table in ("observations", "reflections"):
                    conn.executemany(
                        f"DELETE FROM {table} WHERE tenant_id = ? AND id = ?",  # noqa: S608
                        [(tenant_id, i) for i in replaces],
                    )

        await self._run("save note", write)
        return note

    async def list_notes(
        self, tenant_id: str, session_key: str, *, reflections: bool, limit: int | None = None
    ) -> list[StoredNote]:
        table, cols = ("reflections", _REF) if reflections else ("observations", _OBS)

        def read() -> list[StoredNote]:
            rows = (
                self._db.connection()
                .execute(
                    f"SELECT {cols} FROM {table} WHERE tenant_id = ? AND session_key = ? "  # noqa: S608
                    "ORDER BY pk DESC LIMIT ?",
                    (tenant_id, session_key, -1 if limit is None else limit),
                )
                .fetchall()
            )
            return [_note(r) for r in reversed(rows)]

        out: list[StoredNote] = await self._run("list notes", read)
        return out

    async def delete_notes(self, tenant_id: str, session_key: str, *, reflections: bool) -> int:
        table = "reflections" if reflections else "observations"

        def delete() -> int:
            with self._db.write() as conn:
                return conn.execute(
                    f"DELETE FROM {table} WHERE tenant_id = ? AND session_key = ?",  # noqa: S608
                    (tenant_id, session_key),
                ).rowcount

        count: int = await self._run("delete notes", delete)
        return count

    async def observed_through(self, tenant_id: str, session_key: str) -> int:
        def read() -> int:
            row = (
                self._db.connection()
                .execute(
                    "SELECT max(e) FROM (SELECT max(source_end) AS e FROM observations "
                    "WHERE tenant_id = ? AND session_key = ? UNION ALL SELECT max(source_end) "
                    "FROM reflections WHERE tenant_id = ? AND session_key = ?)",
                    (tenant_id, session_key, tenant_id, session_key),
                )
                .fetchone()
            )
            return -1 if row[0] is None else int(row[0])

        out: int = await self._run("observed through", read)
        return out

    async def acquire_lease(
        self, tenant_id: str, session_key: str, owner: str, seconds: float
    ) -> bool:
        def take() -> bool:
            now = time.time()
            with self._db.write() as conn:
                conn.execute(
                    "INSERT INTO session_leases VALUES (?, ?, ?, ?) ON CONFLICT (tenant_id, "
                    "session_key) DO UPDATE SET owner = excluded.owner, expires_at = "
                    "excluded.expires_at WHERE session_leases.owner = excluded.owner "
                    "OR session_leases.expires_at < ?",
                    (tenant_id, session_key, owner, now + seconds, now),
                )
                row = conn.execute(
                    "SELECT owner FROM session_leases WHERE tenant_id = ? AND session_key = ?",
                    (tenant_id, session_key),
                ).fetchone()
            return bool(row and row[0] == owner)

        out: bool = await self._run("lease", take)
        return out

    async def release_lease(self, tenant_id: str, session_key: str, owner: str) -> None:
        def release() -> None:
            with self._db.write() as conn:
                conn.execute(
                    "DELETE FROM session_leases WHERE tenant_id = ? AND session_key = ? "
                    "AND owner = ?",
                    (tenant_id, session_key, owner),
                )

        await self._run("lease", release)

    async def list_sessions(self, tenant_id: str) -> list[tuple[str, int]]:
        def read() -> list[tuple[str, int]]:
            rows = (
                self._db.connection()
                .execute(
                    "SELECT session_key, count(*) FROM session_messages WHERE tenant_id = ? "
                    "GROUP BY session_key ORDER BY session_key",
                    (tenant_id,),
                )
                .fetchall()
            )
            return [(str(k), int(n)) for k, n in rows]

        out: list[tuple[str, int]] = await self._run("list sessions", read)
        return out

    async def add_graph(
        self,
        tenant_id: str,
        session_key: str,
        entities: Sequence[tuple[str, str]],
        relations: Sequence[tuple[str, str, str]],
    ) -> tuple[int, int]:
        def write() -> tuple[int, int]:
            now = _ts(datetime.now(UTC))
            new_entities = new_relations = 0
            with self._db.write() as conn:

                def entity(name: str, kind: str) -> int:
                    nonlocal new_entities
                    cur = conn.execute(
                        "INSERT INTO graph_entities (tenant_id, name, norm, type, created_at) "
                        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id, norm) DO NOTHING",
                        (tenant_id, name, normalise_entity(name), kind, now),
                    )
                    new_entities += cur.rowcount
                    row = conn.execute(
                        "SELECT pk FROM graph_entities WHERE tenant_id = ? AND norm = ?",
                        (tenant_id, normalise_entity(name)),
                    ).fetchone()
                    return int(row[0])

                for name, kind in entities:
                    entity(name, kind)
                for source, relation, target in relations:
                    cur = conn.execute(
                        "INSERT INTO graph_relations (tenant_id, session_key, source_pk, "
                        "relation, target_pk, created_at) VALUES (?, ?, ?, ?, ?, ?) "
                        "ON CONFLICT DO NOTHING",
                        (
                            tenant_id,
                            session_key,
                            entity(source, ""),
                            relation,
                            entity(target, ""),
                            now,
                        ),
                    )
                    new_relations += cur.rowcount
            return new_entities, new_relations

        out: tuple[int, int] = await self._run("save graph", write)
        return out

    async def graph_neighbourhood(
        self,
        tenant_id: str,
        text: str,
        *,
        session_key: str | None,
        depth: int,
        limit: int,
    ) -> list[tuple[str, str, str]]:
        query = f" {normalise_entity(text)} "
        session = "" if session_key is None else " AND r.session_key = ?"
        extra: tuple[Any, ...] = () if session_key is None else (session_key,)
        sql = (
            "WITH RECURSIVE walk(pk, depth) AS ("  # noqa: S608
            "SELECT pk, 0 FROM graph_entities WHERE tenant_id = ? AND length(norm) >= 2 "
            "AND instr(?, ' ' || norm || ' ') > 0 "
            "UNION SELECT CASE WHEN r.source_pk = w.pk THEN r.target_pk ELSE r.source_pk END, "
            "w.depth + 1 FROM walk w JOIN graph_relations r ON r.tenant_id = ? "
            f"AND (r.source_pk = w.pk OR r.target_pk = w.pk){session} WHERE w.depth < ?), "
            "near(pk, depth) AS (SELECT pk, min(depth) FROM walk GROUP BY pk) "
            "SELECT s.name, r.relation, t.name, min(n.depth) AS d FROM near n "
            "JOIN graph_relations r ON r.tenant_id = ? AND (r.source_pk = n.pk "
            f"OR r.target_pk = n.pk){session} "
            "JOIN graph_entities s ON s.pk = r.source_pk "
            "JOIN graph_entities t ON t.pk = r.target_pk "
            "WHERE n.depth < ? GROUP BY r.pk ORDER BY d, r.pk LIMIT ?"
        )
        params = (tenant_id, query, tenant_id, *extra, depth, tenant_id, *extra, depth, limit)

        def read() -> list[tuple[str, str, str]]:
            rows = self._db.connection().execute(sql, params).fetchall()
            return [(str(a), str(b), str(c)) for a, b, c, _ in rows]

        out: list[tuple[str, str, str]] = await self._run("graph", read)
        return out
