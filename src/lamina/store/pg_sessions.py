"""Sessions and observational memory (store/session_base.py) in PostgreSQL, row-level
security on tenant_id as everywhere."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg.types.json import Jsonb

from lamina.errors import ErrorCode, LaminaError
from lamina.store.pg_context import Transaction
from lamina.store.session_base import (
    NewMessage,
    StoredMessage,
    StoredNote,
    normalise_entity,
)

SUMMARY_PREFIX = "[Compacted Summary]\n"
_MSG = "session_key, idx, role, content, tool_calls, token_count, created_at"
_OBS = "id, session_key, content, token_count, 0, source_start, source_end, created_at"
_REF = "id, session_key, content, token_count, generation, source_start, source_end, created_at"


def _message(row: Sequence[Any]) -> StoredMessage:
    return StoredMessage(row[0], row[1], row[2], row[3], list(row[4]), row[5], row[6])


def _note(row: Sequence[Any]) -> StoredNote:
    return StoredNote(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7])


class PostgresSessions:
    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    async def _lock(self, conn: Any, tenant_id: str, session_key: str) -> None:
        """Writers of one session's messages take turns (indexes must not collide)."""
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 1))",
            (f"{tenant_id}\n{session_key}",),
        )

    async def append_messages(
        self, tenant_id: str, session_key: str, messages: Sequence[NewMessage]
    ) -> list[StoredMessage]:
        now = datetime.now(UTC)
        async with self._tx(tenant_id, "append") as conn:
            await self._lock(conn, tenant_id, session_key)
            top = await (
                await conn.execute(
                    "SELECT max(idx) FROM session_messages WHERE tenant_id = %s "
                    "AND session_key = %s",
                    (tenant_id, session_key),
                )
            ).fetchone()
            start = -1 if top is None or top[0] is None else int(top[0])
            rows = [
                (
                    session_key,
                    start + 1 + i,
                    m.role,
                    m.content,
                    m.tool_calls,
                    m.token_count,
                    m.created_at or now,
                )
                for i, m in enumerate(messages)
            ]
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO session_messages (tenant_id, session_key, idx, role, content, "
                    "tool_calls, token_count, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    [(tenant_id, *r[:4], Jsonb(r[4]), *r[5:]) for r in rows],
                )
        return [_message(r) for r in rows]

    async def list_messages(
        self, tenant_id: str, session_key: str, *, start: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        async with self._tx(tenant_id, "list messages") as conn:
            rows = await (
                await conn.execute(
                    f"SELECT {_MSG} FROM session_messages WHERE tenant_id = %s "  # noqa: S608
                    "AND session_key = %s AND idx >= %s ORDER BY idx LIMIT %s",
                    (tenant_id, session_key, start, limit),
                )
            ).fetchall()
        return [_message(r) for r in rows]

    async def compact_messages(
        self, tenant_id: str, session_key: str, up_to_index: int, summary: str, tokens: int
    ) -> StoredMessage:
        up_to = up_to_index
        key = (tenant_id, session_key)
        async with self._tx(tenant_id, "compact") as conn:
            await self._lock(conn, tenant_id, session_key)
            row = await (
                await conn.execute(
                    "SELECT count(*) FROM session_messages WHERE tenant_id = %s "
                    "AND session_key = %s",
                    key,
                )
            ).fetchone()
            count = int(row[0]) if row else 0
            if up_to < 0 or (up_to >= count and not (up_to == 0 and count == 0)):
                raise LaminaError(
                    ErrorCode.INVALID_ARGUMENT,
                    f"up_to_index {up_to} is out of range: the session has {count} message(s)",
                    details={"up_to_index": up_to, "messages": count},
                )
            await conn.execute(
                "DELETE FROM session_messages WHERE tenant_id = %s AND session_key = %s "
                "AND idx <= %s",
                (*key, up_to),
            )
            first = await (
                await conn.execute(
                    "SELECT min(created_at) FROM session_messages WHERE tenant_id = %s "
                    "AND session_key = %s",
                    key,
                )
            ).fetchone()
            shift = up_to if count else 0
            await conn.execute(
                "UPDATE session_messages SET idx = -idx WHERE tenant_id = %s AND session_key = %s",
                key,
            )
            await conn.execute(
                "UPDATE session_messages SET idx = -idx - %s WHERE tenant_id = %s "
                "AND session_key = %s",
                (shift, *key),
            )
            for table in ("observations", "reflections"):
                await conn.execute(
                    f"UPDATE {table} SET source_start = CASE WHEN source_end <= %s THEN 0 "  # noqa: S608
                    "ELSE greatest(source_start - %s, 1) END, source_end = CASE WHEN "
                    "source_end <= %s THEN 0 ELSE source_end - %s END "
                    "WHERE tenant_id = %s AND session_key = %s",
                    (up_to, shift, up_to, shift, *key),
                )
            earliest = first[0] if first else None
            dated = earliest - timedelta(milliseconds=1) if earliest else datetime.now(UTC)
            message: tuple[Any, ...] = (
                session_key,
                0,
                "system",
                SUMMARY_PREFIX + summary,
                [],
                tokens,
                dated,
            )
            await conn.execute(
                "INSERT INTO session_messages (tenant_id, session_key, idx, role, content, "
                "tool_calls, token_count, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (tenant_id, *message[:4], Jsonb([]), tokens, dated),
            )
        return _message(message)

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
        async with self._tx(tenant_id, "save note") as conn:
            if generation == 0:
                await conn.execute(
                    "INSERT INTO observations (tenant_id, id, session_key, content, token_count, "
                    "source_start, source_end, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    (tenant_id, note.id, session_key, content, tokens, *source, note.created_at),
                )
            else:
                await conn.execute(
                    "INSERT INTO reflections (tenant_id, id, session_key, content, token_count, "
                    "generation, source_start, source_end, created_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        tenant_id,
                        note.id,
                        session_key,
                        content,
                        tokens,
                        generation,
                        *source,
                        note.created_at,
                    ),
                )
            if replaces:
                for table in ("observations", "reflections"):
                    await conn.execute(
                        f"DELETE FROM {table} WHERE tenant_id = %s AND id = ANY(%s)",  # noqa: S608
                        (tenant_id, list(replaces)),
                    )
        return note

    async def list_notes(
        self, tenant_id: str, session_key: str, *, reflections: bool, limit: int | None = None
    ) -> list[StoredNote]:
        table, cols = ("reflections", _REF) if reflections else ("observations", _OBS)
        async with self._tx(tenant_id, "list notes") as conn:
            rows = await (
                await conn.execute(
                    f"SELECT {cols} FROM {table} WHERE tenant_id = %s "  # noqa: S608
                    "AND session_key = %s ORDER BY seq DESC LIMIT %s",
                    (tenant_id, session_key, limit),
                )
            ).fetchall()
        return [_note(r) for r in reversed(rows)]

    async def delete_notes(self, tenant_id: str, session_key: str, *, reflections: bool) -> int:
        table = "reflections" if reflections else "observations"
        async with self._tx(tenant_id, "delete notes") as conn:
            cur = await conn.execute(
                f"DELETE FROM {table} WHERE tenant_id = %s AND session_key = %s",  # noqa: S608
                (tenant_id, session_key),
            )
            return int(cur.rowcount)

    async def observed_through(self, tenant_id: str, session_key: str) -> int:
        async with self._tx(tenant_id, "observed through") as conn:
            row = await (
                await conn.execute(
                    "SELECT greatest((SELECT max(source_end) FROM observations WHERE "
                    "tenant_id = %s AND session_key = %s), (SELECT max(source_end) FROM "
                    "reflections WHERE tenant_id = %s AND session_key = %s))",
                    (tenant_id, session_key, tenant_id, session_key),
                )
            ).fetchone()
        return -1 if row is None or row[0] is None else int(row[0])

    async def acquire_lease(
        self, tenant_id: str, session_key: str, owner: str, seconds: float
    ) -> bool:
        now = time.time()
        async with self._tx(tenant_id, "lease") as conn:
            row = await (
                await conn.execute(
                    "INSERT INTO session_leases VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT (tenant_id, session_key) DO UPDATE SET owner = excluded.owner, "
                    "expires_at = excluded.expires_at WHERE session_leases.owner = excluded.owner "
                    "OR session_leases.expires_at < %s RETURNING owner",
                    (tenant_id, session_key, owner, now + seconds, now),
                )
            ).fetchone()
        return bool(row and row[0] == owner)

    async def release_lease(self, tenant_id: str, session_key: str, owner: str) -> None:
        async with self._tx(tenant_id, "lease") as conn:
            await conn.execute(
                "DELETE FROM session_leases WHERE tenant_id = %s AND session_key = %s "
                "AND owner = %s",
                (tenant_id, session_key, owner),
            )

    async def list_sessions(self, tenant_id: str) -> list[tuple[str, int]]:
        async with self._tx(tenant_id, "list sessions") as conn:
            rows = await (
                await conn.execute(
                    "SELECT session_key, count(*) FROM session_messages WHERE tenant_id = %s "
                    "GROUP BY session_key ORDER BY session_key",
                    (tenant_id,),
                )
            ).fetchall()
        return [(str(k), int(n)) for k, n in rows]

    async def add_graph(
        self,
        tenant_id: str,
        session_key: str,
        entities: Sequence[tuple[str, str]],
        relations: Sequence[tuple[str, str, str]],
    ) -> tuple[int, int]:
        now = datetime.now(UTC)
        new_entities = new_relations = 0
        async with self._tx(tenant_id, "save graph") as conn:

            async def entity(name: str, kind: str) -> int:
                nonlocal new_entities
                cur = await conn.execute(
                    "INSERT INTO graph_entities (tenant_id, name, norm, type, created_at) "
                    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (tenant_id, norm) DO NOTHING",
                    (tenant_id, name, normalise_entity(name), kind, now),
                )
                new_entities += cur.rowcount
                row = await (
                    await conn.execute(
                        "SELECT id FROM graph_entities WHERE tenant_id = %s AND norm = %s",
                        (tenant_id, normalise_entity(name)),
                    )
                ).fetchone()
                return int(row[0])

            for name, kind in entities:
                await entity(name, kind)
            for source, relation, target in relations:
                cur = await conn.execute(
                    "INSERT INTO graph_relations (tenant_id, session_key, source_id, relation, "
                    "target_id, created_at) VALUES (%s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT DO NOTHING",
                    (
                        tenant_id,
                        session_key,
                        await entity(source, ""),
                        relation,
                        await entity(target, ""),
                        now,
                    ),
                )
                new_relations += cur.rowcount
        return new_entities, new_relations

    async def graph_neighbourhood(
        self,
        tenant_id: str,
        text: str,
        *,
        session_key: str | None,
        depth: int,
        limit: int,
    ) -> list[tuple[str, str, str]]:
        session = "" if session_key is None else " AND r.session_key = %(session)s"
        sql = (
            "WITH RECURSIVE walk(id, depth) AS ("  # noqa: S608
            "SELECT id, 0 FROM graph_entities WHERE tenant_id = %(tenant)s "
            "AND length(norm) >= 2 AND strpos(%(query)s, ' ' || norm || ' ') > 0 "
            "UNION SELECT CASE WHEN r.source_id = w.id THEN r.target_id ELSE r.source_id END, "
            "w.depth + 1 FROM walk w JOIN graph_relations r ON r.tenant_id = %(tenant)s "
            f"AND (r.source_id = w.id OR r.target_id = w.id){session} "
            "WHERE w.depth < %(depth)s), "
            "near AS (SELECT id, min(depth) AS depth FROM walk GROUP BY id) "
            "SELECT s.name, r.relation, t.name, min(n.depth) AS d FROM near n "
            "JOIN graph_relations r ON r.tenant_id = %(tenant)s AND (r.source_id = n.id "
            f"OR r.target_id = n.id){session} "
            "JOIN graph_entities s ON s.tenant_id = r.tenant_id AND s.id = r.source_id "
            "JOIN graph_entities t ON t.tenant_id = r.tenant_id AND t.id = r.target_id "
            "WHERE n.depth < %(depth)s GROUP BY r.id, s.name, r.relation, t.name "
            "ORDER BY d, r.id LIMIT %(limit)s"
        )
        params = {
            "tenant": tenant_id,
            "query": f" {normalise_entity(text)} ",
            "session": session_key,
            "depth": depth,
            "limit": limit,
        }
        async with self._tx(tenant_id, "graph") as conn:
            rows = await (await conn.execute(sql, params)).fetchall()
        return [(str(a), str(b), str(c)) for a, b, c, _ in rows]
