"""A score threshold outside [0, 1] is INVALID_ARGUMENT at the server's doors too: the A2A
server (memory_search as a tool message) and `lamina mcp` (the official mcp client over
stdio). Both reach the one check of the library (lamina.checks.check_fraction)."""

from __future__ import annotations

from pathlib import Path

import httpx

from lamina import Lamina
from tests.conftest import fast_settings
from tests.server.harness import result_of, running_server, send, server_settings, tool_message
from tests.server.mcp_support import LAMINA, call, mcp_session, run

BAD = (2, -1, 1.5)


def test_a2a_memory_search_refuses_a_threshold_outside_zero_to_one(tmp_path: Path) -> None:
    with (
        running_server(server_settings(tmp_path / "data")) as running,
        httpx.Client(base_url=running.url, timeout=60) as client,
    ):
        added = {"content": "Alice likes aisle seats", "layer": "user", "user_id": "alice"}
        kept = result_of(send(client, tool_message("memory_add", added)))
        for bad in BAD:
            args = {"query": "aisle seats", "user_id": "alice", "threshold": bad}
            task = send(client, tool_message("memory_search", args))
            assert task["status"]["state"] == "TASK_STATE_REJECTED"
            error = task["status"]["message"]["parts"][1]["data"]["error"]
            assert error["code"] == "INVALID_ARGUMENT"
            assert error["message"] == f"threshold must be from 0 to 1, not {bad:g}"
            assert error["details"]["field"] == "threshold"
        args = {"query": "aisle seats", "user_id": "alice", "threshold": 0}
        found = result_of(send(client, tool_message("memory_search", args)))
        assert [h["memory"]["id"] for h in found["results"]] == [kept["id"]]


def test_mcp_memory_search_refuses_a_threshold_outside_zero_to_one(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with Lamina(fast_settings(data)) as ms:
        kept = ms.memory.add("Alice likes aisle seats", layer="user", user_id="alice")

    async def scenario() -> None:
        async with mcp_session(str(LAMINA), ["mcp"], {}, data, tmp_path / "err") as session:
            await session.initialize()
            for bad in BAD:
                args = {"query": "aisle seats", "user_id": "alice", "threshold": bad}
                error, body = await call(session, "memory_search", args)
                assert error and body["error"]["code"] == "INVALID_ARGUMENT"
                assert body["error"]["message"] == f"threshold must be from 0 to 1, not {bad:g}"
            args = {"query": "aisle seats", "user_id": "alice", "threshold": 0}
            error, found = await call(session, "memory_search", args)
            assert not error and [h["memory"]["id"] for h in found["results"]] == [kept.id]

    run(scenario)
