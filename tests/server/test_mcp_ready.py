"""`lamina mcp` over stdio serves while its store opens (issue 35, requirement 3): a client's
first tool call, made right after initialize on a new data directory, waits for the store and
works, on SQLite and PostgreSQL; a store that cannot start still stops the server, with the
error and exit code of a start failure, after answering initialize and tools/list without it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.server.args_support import STORES, store_overrides
from tests.server.mcp_support import LAMINA, mcp_session, ok, run

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}

INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


@STORES
def test_a_tool_call_right_after_initialize_waits_for_the_store(store: str, tmp_path: Path) -> None:
    url = store_overrides(store).get("database_url")
    env = {"LAMINA_DATABASE_URL": url} if url else {}
    data, errlog = tmp_path / "d", tmp_path / "err"

    async def scenario() -> None:
        async with mcp_session(str(LAMINA), ["mcp"], env, data, errlog) as session:
            await session.initialize()
            listed = {t.name for t in (await session.list_tools()).tools}
            assert {"memory_add", "memory_search"} <= listed
            added = await ok(
                session,
                "memory_add",
                {"content": "Alice prefers PostgreSQL", "layer": "user", "user_id": "alice"},
            )
            found = await ok(
                session,
                "memory_search",
                {"query": "Alice prefers PostgreSQL", "user_id": "alice", "mode": "keyword"},
            )
            assert [r["memory"]["id"] for r in found["results"]] == [added["id"]]

    run(scenario)
    kind = "postgresql" if url else "sqlite"
    assert f"lamina MCP server (stdio): data directory {data}; database {kind}" in (
        errlog.read_text(encoding="utf-8")
    )


def test_a_store_that_cannot_start_stops_the_server_as_before_after_answering(
    tmp_path: Path,
) -> None:
    env = {
        **os.environ,
        "LAMINA_DATA_DIR": str(tmp_path / "d"),
        "LAMINA_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/lamina",
        # one retry, late: the client's initialize and tools/list are answered meanwhile
        "LAMINA_RETRY__MAX_RETRIES": "1",
        "LAMINA_RETRY__INITIAL_DELAY": "5",
    }
    with subprocess.Popen(
        [str(LAMINA), "mcp"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as server:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps(INITIALIZE) + "\n")
        server.stdin.flush()  # and kept open, as a client does
        answer = json.loads(server.stdout.readline())
        assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "lamina"
        server.stdin.write(json.dumps(INITIALIZED) + "\n" + json.dumps(LIST) + "\n")
        server.stdin.flush()  # answered once the runtime is built, before the store is open
        listed = json.loads(server.stdout.readline())
        assert listed["id"] == 2 and "memory_search" in {
            t["name"] for t in listed["result"]["tools"]
        }
        stdout, stderr = server.communicate(timeout=60)
    assert server.returncode == 1, stderr
    assert stdout == ""
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, stderr
    assert errors[0].startswith("error: PROVIDER_ERROR: PostgreSQL unavailable during initialize")
    assert "lamina MCP server (stdio)" not in stderr  # said only once the store is open
