"""PostgreSQL finds a user's agent and session memories by index under row-level security
(migration 20: the index on identifiers' user_id, and ``jsonb ->> text`` marked LEAKPROOF
when a superuser migrates, as the tests do): the plan of the app's role looks the user up in
the index instead of reading the layer of the tenant."""

from __future__ import annotations

from pathlib import Path

import psycopg

from lamina import Lamina
from tests.conftest import fast_settings
from tests.pg import require_postgres, reset_database


def _plan(url: str, sql: str, *params: str) -> str:
    with psycopg.connect(url) as conn:
        conn.execute("SET ROLE lamina_app")  # the role lamina reads as: row-level security on
        conn.execute("SELECT set_config('lamina.tenant_id', 'default', true)")
        conn.execute("SET LOCAL enable_seqscan = off")  # a tiny table: ask for an index
        found = conn.execute(f"EXPLAIN {sql}", params).fetchall()  # type: ignore[call-overload]
        return "\n".join(str(r[0]) for r in found)


def test_a_users_agent_memories_are_looked_up_by_index_under_row_level_security(
    tmp_path: Path,
) -> None:
    url = require_postgres()
    reset_database(url)
    with Lamina(fast_settings(tmp_path, database_url=url)) as ms:
        ms.memory.add("The bot calls Alice 'Al'", layer="agent", agent_id="bot", user_id="alice")
        ms.memory.add("Alice likes tea", layer="user", user_id="alice")
        ms.memory.add("The bot calls Bob 'B'", layer="agent", agent_id="bot", user_id="bob")
        page = ms.memory.list_all(user_id="alice")
        assert sorted(m.content for m in page.items) == [
            "Alice likes tea",
            "The bot calls Alice 'Al'",
        ]
        assert ms.memory.count_all(user_id="alice") == 2
    plan = _plan(
        url,
        "SELECT id FROM memories WHERE tenant_id = %s AND layer = 'agent' "
        "AND identifiers ->> 'user_id' = %s",
        "default",
        "alice",
    )
    conditions = [line for line in plan.splitlines() if "Index Cond" in line]
    assert any("memories_user" in line for line in plan.splitlines()), plan
    assert any("user_id" in line for line in conditions), plan
