"""A write refused for a secret leaves no copy of the secret behind: not in the task's history
(GetTask, the stored row), not in the thread's conversation context."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.server.harness import rpc, running_server, send, server_settings, tool_message

KEY = "AKIAIOSFODNN7EXAMPLE"


def test_a_refused_secret_is_stored_and_returned_redacted(tmp_path: Path) -> None:
    with (
        running_server(server_settings(tmp_path / "d")) as live,
        httpx.Client(base_url=live.url, timeout=30) as client,
    ):
        # Asked for its layer first (input-required), then refused when it is shared.
        waiting = send(
            client,
            tool_message("memory_add", {"content": f"deploy key {KEY}", "project_id": "p"}),
        )
        assert waiting["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", waiting["status"]
        reply = tool_message(
            "memory_add",
            {"layer": "project", "metadata": {"note": f"split {KEY[:10]}\n{KEY[10:]}"}},
            taskId=waiting["id"],
        )
        done = send(client, reply)
        assert done["status"]["state"] == "TASK_STATE_REJECTED", done["status"]
        got = rpc(client, "GetTask", {"id": done["id"]})["result"]
        stored = live.run(live.server.ms.store.threads.get_task("default", done["id"]))
        thread = live.run(live.server.threads.get("default", done["contextId"]))
        for where in (json.dumps(done), json.dumps(got), stored.data, thread.to_dict()):
            text = json.dumps(where)
            assert KEY not in text and KEY[:10] not in text, text
        assert "[REDACTED]" in json.dumps(got["history"])
        assert thread.conversation_context["pending"] == {}
        # Nothing was stored, and an ordinary write still comes back whole.
        ok = send(
            client,
            tool_message("memory_add", {"content": "plain", "layer": "user", "user_id": "u"}),
        )
        again = rpc(client, "GetTask", {"id": ok["id"]})["result"]
        assert again["history"][0]["parts"][0]["data"]["arguments"]["content"] == "plain"
        assert again["status"]["state"] == "TASK_STATE_COMPLETED"
