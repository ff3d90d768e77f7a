"""The desktop client configurations of docs/mcp.md, run as written: each snippet's command,
arguments and environment start `lamina mcp` over stdio, driven by the official mcp client.
Also the default identifiers of `lamina mcp`: filled in when a call omits them, overridden by
an explicit value (an explicit null: none), and absent defaults leave the MISSING_IDENTIFIER
errors as they were."""

from __future__ import annotations

import os
import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.server.mcp_support import (
    CLIENTS,
    LAMINA,
    call,
    command_of,
    documented_tool_count,
    expected_defaults,
    mcp_session,
    run,
    server_entry,
    snippets,
)

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow


def test_the_page_holds_one_config_per_client_matching_the_command() -> None:
    found = snippets()
    assert set(found) == set(CLIENTS)
    help_text = subprocess.run(
        [str(LAMINA), "mcp", "--help"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    for client, config in found.items():
        entry = server_entry(client, config)
        assert entry["command"] == "lamina"
        assert entry["args"][0] == "mcp" and "--user-id" in entry["args"]
        for flag in (a for a in entry["args"] if a.startswith("--")):
            assert flag in help_text, f"{client}: {flag} is not an option of lamina mcp"
        assert expected_defaults(entry).get("user_id") == "alice"


@pytest.mark.parametrize("client", CLIENTS)
def test_each_documented_config_serves_with_its_defaults(client: str, tmp_path: Path) -> None:
    entry = server_entry(client, snippets()[client])
    defaults = expected_defaults(entry)

    async def scenario() -> None:
        async with mcp_session(
            command_of(entry), entry["args"], entry.get("env", {}), tmp_path / "d", tmp_path / "err"
        ) as session:
            init = await session.initialize()
            assert init.server_info.name == "lamina"
            assert init.server_info.version == version("lamina")
            assert f"user_id={defaults['user_id']!r}" in (init.instructions or "")

            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert len(tools) == documented_tool_count()
            for name in ("memory_add", "memory_search", "memory_list"):
                schema = tools[name].input_schema
                for ident, value in defaults.items():
                    assert schema["properties"][ident]["default"] == value, (name, ident)
                    assert "defaults to" in schema["properties"][ident]["description"]
                    assert ident not in schema.get("required", [])
            assert "user_id" not in tools["knowledge_query"].input_schema["properties"]

            error, added = await call(
                session, "memory_add", {"content": f"{client} prefers tabs", "layer": "user"}
            )
            assert not error, added
            assert added["identifiers"] == {"user_id": defaults["user_id"]}
            error, found = await call(
                session, "memory_search", {"query": "prefers tabs", "mode": "keyword"}
            )
            assert not error, found
            assert [r["memory"]["content"] for r in found["results"]] == [f"{client} prefers tabs"]

            if "agent_id" in defaults:  # Cursor's comes from the environment, not an option
                error, added = await call(
                    session, "memory_add", {"content": "agent note", "layer": "agent"}
                )
                assert not error, added
                assert added["identifiers"] == {
                    "agent_id": defaults["agent_id"],
                    "user_id": defaults["user_id"],
                }

    run(scenario)
    assert "Traceback" not in (tmp_path / "err").read_text(encoding="utf-8")


def test_an_explicit_identifier_wins_over_the_default(tmp_path: Path) -> None:
    args = ["mcp", "--user-id", "alice", "--project-id", "atlas", "--team-id", "core"]
    data = tmp_path / "d"
    register = ["hierarchy", "register", "--project-id", "other", "--team-id", "platform"]
    subprocess.run(
        [str(LAMINA), "--data-dir", str(data), *register],
        capture_output=True,
        timeout=60,
        check=True,
    )

    async def scenario() -> None:
        async with mcp_session(str(LAMINA), args, {}, data, tmp_path / "err") as session:
            await session.initialize()
            error, bob = await call(
                session,
                "memory_add",
                {"content": "bob likes vim", "layer": "user", "user_id": "bob"},
            )
            assert not error and bob["identifiers"] == {"user_id": "bob"}
            error, alice = await call(
                session, "memory_add", {"content": "alice likes vim", "layer": "user"}
            )
            assert not error and alice["identifiers"] == {"user_id": "alice"}
            # An explicit null is "none": the default is not applied.
            error, nobody = await call(
                session,
                "memory_add",
                {"content": "nobody likes vim", "layer": "user", "user_id": None},
            )
            assert error and nobody["error"]["code"] == "MISSING_IDENTIFIER"

            query = {"query": "likes vim", "mode": "keyword", "layers": ["user"]}
            _, mine = await call(session, "memory_search", query)
            assert [r["memory"]["content"] for r in mine["results"]] == ["alice likes vim"]
            _, his = await call(session, "memory_search", {**query, "user_id": "bob"})
            assert [r["memory"]["content"] for r in his["results"]] == ["bob likes vim"]

            # The team default belongs to the default project: another project keeps the
            # team registered for it, not --team-id.
            error, team = await call(session, "memory_add", {"content": "t", "layer": "team"})
            assert not error and team["identifiers"] == {"team_id": "core"}
            error, other = await call(
                session, "memory_add", {"content": "t", "layer": "team", "project_id": "other"}
            )
            assert not error and other["identifiers"] == {"team_id": "platform"}

    run(scenario)


def test_without_defaults_a_missing_identifier_fails_as_before(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with mcp_session(
            str(LAMINA), ["mcp"], {}, tmp_path / "d", tmp_path / "err"
        ) as session:
            init = await session.initialize()
            assert init.server_info.version == version("lamina")
            assert "fills in" not in (init.instructions or "")
            tools = {t.name: t for t in (await session.list_tools()).tools}
            user_id = tools["memory_add"].input_schema["properties"]["user_id"]
            assert user_id.get("default") is None and "description" not in user_id

            error, add = await call(session, "memory_add", {"content": "x", "layer": "user"})
            assert error and add["error"]["code"] == "MISSING_IDENTIFIER"
            assert add["error"]["message"] == "layer 'user' requires user_id"
            assert add["error"]["details"] == {"identifier": "user_id", "layer": "user"}
            error, search = await call(session, "memory_search", {"query": "x"})
            assert error and search["error"]["code"] == "MISSING_IDENTIFIER"
            assert search["error"]["message"].startswith("no memory layer is reachable")

    run(scenario)


@pytest.mark.parametrize(
    ("args", "env"),
    [(["--user-id", ""], {}), ([], {"LAMINA_MCP__PROJECT_ID": "bad\nid"})],
    ids=["empty-option", "control-character-in-env"],
)
def test_an_invalid_default_stops_the_server_at_start(
    args: list[str], env: dict[str, str], tmp_path: Path
) -> None:
    done = subprocess.run(
        [str(LAMINA), "mcp", *args],
        env={**os.environ, **env, "LAMINA_DATA_DIR": str(tmp_path / "d")},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("error: CONFIGURATION_ERROR: default identifier:"), done.stderr
    assert done.stdout == ""
