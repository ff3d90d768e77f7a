"""Tool arguments are strict JSON over MCP too: `lamina mcp` over stdio with the official mcp
client, one session running every wrong-typed call of the table (tests/server/args_support.py)
on SQLite and PostgreSQL: each is an error result with INVALID_ARGUMENT naming the field, and
nothing is stored, changed or deleted. A number field still takes an integer."""

from __future__ import annotations

from pathlib import Path

from lamina.config import Settings
from tests.conftest import fast_settings
from tests.server.args_support import (
    STORES,
    assert_unchanged,
    bad_argument,
    cases,
    seed,
    snapshot,
    store_overrides,
)
from tests.server.mcp_support import LAMINA, call, mcp_session, ok, run


def environment(settings: Settings) -> dict[str, str]:
    url = settings.database_url
    return {"LAMINA_DATABASE_URL": url} if url else {}


@STORES
def test_mcp_refuses_wrong_types_and_changes_nothing(store: str, tmp_path: Path) -> None:
    data = tmp_path / "d"
    settings = fast_settings(data, **store_overrides(store))
    ids = seed(settings)
    table = cases(ids)
    before = snapshot(settings)

    async def scenario() -> None:
        env = environment(settings)
        async with mcp_session(str(LAMINA), ["mcp"], env, data, tmp_path / "err") as session:
            await session.initialize()
            listed = {t.name for t in (await session.list_tools()).tools}
            assert {tool for tool, _, _ in table} == listed
            for tool, arguments, field in table:
                error, body = await call(session, tool, arguments)
                assert error, (tool, arguments, body)
                bad_argument(body["error"], tool, field, arguments)
            assert_unchanged(before, snapshot(settings))
            search = {"query": "aisle seats", "user_id": "alice", "mode": "keyword"}
            for threshold in (0, 1):
                await ok(session, "memory_search", {**search, "threshold": threshold})
            found = await ok(session, "memory_search", {**search, "threshold": 0})
            assert [h["memory"]["id"] for h in found["results"]] == [ids["memory"]]

    run(scenario)
