"""A session's base system prompt at the A2A door, on SQLite and PostgreSQL: the one the
context-aware model keeps (``ms.sessions.set_system_prompt``) is what ``context_prompt``
starts from when the call gives no base, as ``model.augment`` does; a base given is used
for that call and not kept; ``session_system_prompt`` reads, replaces and clears it as the
library and ``lamina session system-prompt`` do; ``session_messages`` returns it, as
``lamina session show`` prints it; another tenant's same key has none."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lamina.server.auth import hash_key, new_key
from tests.server.args_support import store_overrides
from tests.server.harness import (
    Running,
    result_of,
    running_server,
    send,
    server_settings,
    tool_message,
)

KEY_A, KEY_B = new_key(), new_key()
A = {"Authorization": f"Bearer {KEY_A}"}
B = {"Authorization": f"Bearer {KEY_B}"}
S = "telegram:42:7"
KEPT = "You are the travel agent of Acme."
MAX = 400  # memory.max_content_length: a prompt longer is CONTENT_TOO_LONG


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Running]:
    settings = server_settings(
        Path(tmp_path_factory.mktemp(f"prompt-{request.param}")) / "data",
        api_keys=[
            {"key_hash": hash_key(KEY_A), "tenant_id": "acme", "tier": "default"},
            {"key_hash": hash_key(KEY_B), "tenant_id": "globex", "tier": "default"},
        ],
        tiers={"default": {"requests_per_minute": 10_000}},
        _settings={**store_overrides(request.param), "memory": {"max_content_length": MAX}},
    )
    with running_server(settings) as running:
        yield running


@pytest.fixture
def client(live: Running) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=60) as c:
        yield c


def call(client: httpx.Client, headers: dict[str, str], tool: str, args: dict[str, Any]) -> Any:
    task = send(client, tool_message(tool, args), headers=headers)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
    return result_of(task)


def kept(live: Running, tenant: str = "acme") -> str | None:
    """The session's base system prompt, as the library reads it."""
    found: str | None = live.run(live.server.ms.sessions.system_prompt(S, tenant_id=tenant))
    return found


def test_context_prompt_starts_from_the_sessions_kept_prompt(
    live: Running, client: httpx.Client
) -> None:
    ms = live.server.ms
    live.run(ms.sessions.set_system_prompt(S, KEPT, tenant_id="acme"))
    live.run(ms.sessions.append(S, "user", "Book me a flight to Lisbon", tenant_id="acme"))
    for args in ({}, {"base": ""}, {"base": "   "}):
        built = call(client, A, "context_prompt", {"query": "why?", "session_key": S, **args})
        assert built["prompt"].startswith(KEPT), (args, built["prompt"])
        assert [m["content"] for m in built["messages"]] == ["Book me a flight to Lisbon"]
    # A base given wins for the call and is not kept (context_prompt reads only).
    given = call(
        client, A, "context_prompt", {"query": "why?", "session_key": S, "base": "You are ops."}
    )
    assert given["prompt"].startswith("You are ops.") and KEPT not in given["prompt"]
    assert kept(live) == KEPT
    # Without a session there is no session, so no kept prompt.
    assert call(client, A, "context_prompt", {"query": "why?"})["prompt"] == ""
    # Another tenant's same key is another session, with no prompt kept.
    other = call(client, B, "context_prompt", {"query": "why?", "session_key": S})
    assert other == {"prompt": "", "messages": [], "memory_ids": []}
    assert call(client, B, "session_system_prompt", {"session_key": S})["system_prompt"] is None


def test_session_system_prompt_reads_replaces_and_clears(
    live: Running, client: httpx.Client
) -> None:
    key = {"session_key": S}
    live.run(live.server.ms.sessions.set_system_prompt(S, KEPT, tenant_id="acme"))
    assert call(client, A, "session_system_prompt", key) == {
        "session_key": S,
        "system_prompt": KEPT,
    }
    assert call(client, A, "session_messages", key)["system_prompt"] == KEPT
    new = "You are the booking assistant."
    assert call(client, A, "session_system_prompt", {**key, "prompt": new})["system_prompt"] == new
    assert kept(live) == new
    built = call(client, A, "context_prompt", {"query": "why?", **key})
    assert built["prompt"].startswith(new)
    # Too long: refused, the kept prompt unchanged.
    task = send(
        client, tool_message("session_system_prompt", {**key, "prompt": "x" * (MAX + 1)}), headers=A
    )
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    error = task["status"]["message"]["parts"][1]["data"]["error"]
    assert error["code"] == "CONTENT_TOO_LONG", error
    assert kept(live) == new
    # null and "" clear it; then context_prompt has no base.
    for cleared in (None, ""):
        live.run(live.server.ms.sessions.set_system_prompt(S, KEPT, tenant_id="acme"))
        done = call(client, A, "session_system_prompt", {**key, "prompt": cleared})
        assert done["system_prompt"] is None and kept(live) is None
    assert call(client, A, "session_messages", key)["system_prompt"] is None
    built = call(client, A, "context_prompt", {"query": "why?", **key})
    assert not built["prompt"].startswith(KEPT)
    assert kept(live, "globex") is None
