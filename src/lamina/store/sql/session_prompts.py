"""A session's base system prompt in SQL, for both backends: one row per session, replaced
when a new one is set, deleted to clear it (lamina.observational.ports.SessionStore)."""

from __future__ import annotations

from datetime import UTC, datetime

from lamina.store.sql.dialect import Dialect
from lamina.store.sql.program import Executor, Program, count, row


class SqlSessionPrompts:
    """``system_prompt`` and ``set_system_prompt`` of the SessionStore protocol."""

    _exec: Executor
    _d: Dialect

    async def system_prompt(self, tenant_id: str, session_key: str) -> str | None:
        def read() -> Program[str | None]:
            found = yield row(
                "SELECT content FROM session_prompts WHERE tenant_id = %s AND session_key = %s",
                tenant_id,
                session_key,
            )
            return None if found is None else str(found[0])

        return await self._exec.read(tenant_id, "system prompt", read())

    async def set_system_prompt(
        self, tenant_id: str, session_key: str, content: str | None
    ) -> None:
        def write() -> Program[None]:
            if content is None:
                yield count(
                    "DELETE FROM session_prompts WHERE tenant_id = %s AND session_key = %s",
                    tenant_id,
                    session_key,
                )
                return
            yield count(
                "INSERT INTO session_prompts (tenant_id, session_key, content, updated_at) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (tenant_id, session_key) DO UPDATE SET "
                "content = excluded.content, updated_at = excluded.updated_at",
                tenant_id,
                session_key,
                content,
                self._d.time(datetime.now(UTC)),
            )

        await self._exec.write(tenant_id, "set system prompt", write())
