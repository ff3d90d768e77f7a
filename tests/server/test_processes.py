"""`lamina serve` and `lamina mcp` as real processes: the CLI end to end, two server
processes on one PostgreSQL database serving the same threads, and MCP over stdio."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.pg import empty_database, require_postgres
from tests.server.harness import (
    HEADERS,
    mcp_http_process,
    result_of,
    rpc,
    send,
    session_of,
    tool_message,
)
from tests.server.mcp_support import documented_tool_count

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow


@contextmanager
def serve_process(
    *args: str,
    env: dict[str, str] | None = None,
    serve_args: tuple[str, ...] = (),
    banner: list[str] | None = None,
) -> Iterator[str]:
    """A ``lamina serve`` process on an ephemeral port; its URL. ``banner``: filled with the
    two lines it prints once listening."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lamina",
            *args,
            "serve",
            *serve_args,
            "--port",
            "0",
            "--log-level",
            "warning",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "LAMINA_RETRY__INITIAL_DELAY": "0.01", **(env or {})},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if "http://" not in line:
            process.kill()
            raise AssertionError(
                f"no banner: {line!r} {process.stderr.read() if process.stderr else ''}"
            )
        if banner is not None:
            banner += [line.strip(), process.stdout.readline().strip()]
        yield line.strip().split()[-1].rstrip("/")
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            _, errors = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            _, errors = process.communicate(timeout=10)
        # uvicorn shuts down gracefully, then re-raises the signal it caught.
        assert process.returncode in (0, -signal.SIGTERM), errors
        assert "Traceback" not in errors, errors


def test_lamina_serve_end_to_end(tmp_path: Path) -> None:
    with (
        serve_process("--data-dir", str(tmp_path / "d")) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        card = client.get("/.well-known/agent-card.json").json()
        assert card["supportedInterfaces"][0]["url"] == url.rstrip("/")
        task = send(
            client,
            tool_message(
                "memory_add", {"content": "from a process", "layer": "user", "user_id": "p"}
            ),
        )
        assert result_of(task)["content"] == "from a process"
        assert client.get("/health").status_code == 200
    with (
        serve_process("--data-dir", str(tmp_path / "d")) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        got = rpc(client, "GetTask", {"id": task["id"]})["result"]
        assert got["status"]["state"] == "TASK_STATE_COMPLETED"


def test_the_banner_names_the_tenants_the_keys_act_for(tmp_path: Path) -> None:
    """With API keys every request acts for its key's tenant, never ``tenant_id``: the
    banner says which tenants those are (and says ``tenant_id`` only without keys)."""
    from lamina.server.auth import hash_key, new_key

    config = tmp_path / "lamina.toml"
    entries = [(new_key(), "acme"), (new_key(), "globex"), (new_key(), "acme")]
    config.write_text(
        "".join(
            f'[[server.api_keys]]\nkey_hash = "{hash_key(key)}"\ntenant_id = "{tenant}"\n'
            for key, tenant in entries
        ),
        encoding="utf-8",
    )
    keyed: list[str] = []
    with serve_process(
        "--data-dir", str(tmp_path / "d"), "--config", str(config), banner=keyed
    ) as url:
        key, _ = entries[1]
        with httpx.Client(base_url=url, timeout=30) as client:
            added = send(
                client,
                tool_message(
                    "memory_add", {"content": "globex's", "layer": "user", "user_id": "g"}
                ),
                headers={"Authorization": f"Bearer {key}"},
            )
            assert result_of(added)["tenant_id"] == "globex"
    assert keyed[0].startswith("lamina A2A server on http://127.0.0.1:")
    assert keyed[1].endswith("; tenants from API keys: acme, globex"), keyed
    assert "tenant default" not in keyed[1]
    plain: list[str] = []
    with serve_process("--data-dir", str(tmp_path / "d"), "--tenant", "solo", banner=plain):
        pass
    assert plain[1].endswith("; tenant solo (no API keys)"), plain


def test_two_servers_on_one_postgres_serve_the_same_threads(tmp_path: Path) -> None:
    url = require_postgres()
    empty_database(url)
    common = ("--data-dir", str(tmp_path / "shared"), "--database-url", url)
    with (
        serve_process(*common) as one,
        serve_process(*common) as two,
        httpx.Client(base_url=one, timeout=30) as a,
        httpx.Client(base_url=two, timeout=30) as b,
    ):
        send(
            a,
            tool_message(
                "memory_add",
                {"content": "Dana ships on Mondays", "layer": "user", "user_id": "dana"},
            ),
        )
        first = send(
            a,
            tool_message(
                "memory_search",
                {"query": "ships"},
                metadata={"user_id": "dana", "session_context": True},
            ),
        )
        thread = first["contextId"]
        assert session_of(first)["identifiers"] == {"user_id": "dana"}
        # The other process continues the thread: it knows the thread's identifiers.
        second = send(b, tool_message("memory_list", {}, contextId=thread))
        assert second["status"]["state"] == "TASK_STATE_COMPLETED", second["status"]
        assert [m["content"] for m in result_of(second)["items"]] == ["Dana ships on Mondays"]
        assert session_of(second) is None
        # Tasks made by one are read and listed by the other.
        assert rpc(b, "GetTask", {"id": first["id"]})["result"]["id"] == first["id"]
        listed = rpc(a, "ListTasks", {"contextId": thread})["result"]
        assert listed["totalSize"] == 2
        # A task waiting for input on one is answered through the other.
        waiting = send(a, tool_message("memory_add", {"layer": "user"}, contextId=thread))
        assert waiting["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        reply = {
            "messageId": "x-" + waiting["id"],
            "role": "ROLE_USER",
            "taskId": waiting["id"],
            "contextId": thread,
            "parts": [{"data": {"content": "answered on two"}}],
        }
        done = send(b, reply)
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        assert result_of(done)["identifiers"] == {"user_id": "dana"}
        assert a.get("/health").json()["checks"]["database"]["backend"] == "postgresql"
        assert HEADERS


def test_mcp_over_stdio(tmp_path: Path) -> None:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def scenario() -> None:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "lamina", "--data-dir", str(tmp_path / "d"), "mcp"],
            env={**os.environ},
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            names = {t.name for t in tools}
            assert (
                len(names) == documented_tool_count()
                and {"memory_add", "knowledge_query", "context_prompt"} <= names
            )
            add = next(t for t in tools if t.name == "memory_add")
            assert "content" in add.input_schema["required"]
            added = await session.call_tool(
                "memory_add", {"content": "MCP remembers", "layer": "user", "user_id": "m"}
            )
            assert not added.is_error
            found = await session.call_tool(
                "memory_search", {"query": "remembers", "user_id": "m", "mode": "keyword"}
            )
            payload = json.loads(found.content[0].text)
            assert payload["results"][0]["memory"]["content"] == "MCP remembers"
            bad = await session.call_tool("memory_add", {"layer": "user"})
            assert bad.is_error
            assert json.loads(bad.content[0].text)["error"]["details"]["missing"] == ["content"]

    asyncio.run(scenario())


def test_mcp_over_streamable_http_with_api_keys(tmp_path: Path) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from lamina.server.auth import hash_key, new_key

    key = new_key()
    config = tmp_path / "lamina.toml"
    config.write_text(
        f'[[server.api_keys]]\nkey_hash = "{hash_key(key)}"\ntenant_id = "acme"\n'
        'tier = "small"\n[server.tiers.small]\nrequests_per_minute = 10000\n'
        "[server.tiers.small.skills]\ngovernance = 2\n",
        encoding="utf-8",
    )
    with mcp_http_process(tmp_path / "d", config) as url:
        assert httpx.post(url, json={}).status_code == 401

        async def scenario() -> None:
            import httpx2

            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http2,
                streamable_http_client(url, http_client=http2) as (read, write, *_),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                assert len((await session.list_tools()).tools) == documented_tool_count()
                added = await session.call_tool(
                    "memory_add", {"content": "over http", "layer": "user", "user_id": "h"}
                )
                assert json.loads(added.content[0].text)["tenant_id"] == "acme"
                # The context skill: a session kept over MCP, and the prompt for a follow-up.
                turn = {"role": "user", "content": "the staging cluster lags"}
                kept = await session.call_tool(
                    "session_append", {"session_key": "mcp:1", "messages": [turn]}
                )
                assert json.loads(kept.content[0].text)["messages"][0]["index"] == 0
                built = await session.call_tool(
                    "context_prompt", {"query": "why?", "base": "Ops.", "session_key": "mcp:1"}
                )
                prompt = json.loads(built.content[0].text)
                assert prompt["prompt"].startswith("Ops.")
                assert prompt["messages"][0]["content"] == "the staging cluster lags"

        asyncio.run(scenario())

        # MCP calls count under their tool's skill: the third governance call in the
        # minute is refused (the gate counts before the MCP app reads the call).
        def call(tool: str) -> httpx.Response:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
            body["params"] = {"name": tool, "arguments": {}}
            headers = {"Authorization": f"Bearer {key}", "Accept": "application/json"}
            return httpx.post(url, json=body, headers=headers)

        assert [call("governance_policies").status_code != 429 for _ in range(2)] == [True] * 2
        refused = call("governance_validate")
        assert refused.status_code == 429, refused.text
        assert "governance" in refused.text and refused.headers["retry-after"]
        assert call("memory_list").status_code != 429


def _children(parent: int) -> list[int]:
    """The worker processes uvicorn spawned for ``parent``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"spawn_main" in command:
            found.append(int(entry.name))
    return found


def _serving(data_dir: Path) -> int:
    """The pid of the ``lamina serve`` process serving ``data_dir``."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"serve" in command and str(data_dir).encode() in command:
                return int(entry.name)
    raise AssertionError("no lamina serve process")


def test_several_processes_share_one_address(tmp_path: Path) -> None:
    """``lamina serve --workers 2``: two processes accept on one address; a call on a new
    connection may reach either, and each sees the other's memories, tasks and inspector
    sign-ins (one ui_secret made for both)."""
    from lamina.server.auth import hash_key, new_key
    from tests.server.ui_support import sign_in

    key = new_key()
    config = tmp_path / "lamina.toml"
    config.write_text(
        f'[[server.api_keys]]\nkey_hash = "{hash_key(key)}"\ntenant_id = "acme"\n',
        encoding="utf-8",
    )
    data = tmp_path / "d"
    auth = {"Authorization": f"Bearer {key}"}
    fresh = httpx.Limits(max_keepalive_connections=0)  # a new connection for every request
    banner: list[str] = []
    with (
        serve_process(
            "--data-dir",
            str(data),
            "--config",
            str(config),
            serve_args=("--workers", "2"),
            banner=banner,
        ) as url,
        httpx.Client(base_url=url, timeout=60, headers=auth, limits=fresh) as client,
    ):
        # The banner is printed before the supervisor spawns its workers: wait for them.
        deadline = time.monotonic() + 60
        while len(_children(_serving(data))) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(_children(_serving(data))) == 2
        assert banner[1].endswith("; tenants from API keys: acme; 2 processes"), banner
        tasks = [
            send(
                client,
                tool_message(
                    "memory_add", {"content": f"note {i}", "layer": "user", "user_id": "p"}
                ),
            )
            for i in range(12)
        ]
        assert all(t["status"]["state"] == "TASK_STATE_COMPLETED" for t in tasks)
        for task in tasks:  # written by one process or the other, found by either
            found = rpc(client, "GetTask", {"id": task["id"]})
            assert found["result"]["id"] == task["id"], found
        listed = send(client, tool_message("memory_list", {"user_id": "p", "limit": 50}))
        assert len(result_of(listed)["items"]) == 12
        with sign_in(url, key) as ui:
            for _ in range(8):
                with httpx.Client(base_url=url, cookies=ui.cookies, limits=fresh) as other:
                    page = other.get("/ui/memories")
                    assert page.status_code == 200, page.status_code


def test_several_processes_that_cannot_start_stop_the_server(tmp_path: Path) -> None:
    """Workers whose store is unreachable end at start: the server exits with an error and
    leaves no process behind (it does not start them again and again)."""
    mark = tmp_path.name
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "lamina",
            "--database-url",
            "postgresql://nobody@127.0.0.1:1/nothing",
            "serve",
            "--data-dir",
            str(tmp_path / "d"),
            "--port",
            "0",
            "--workers",
            "2",
            "--log-level",
            "warning",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "LAMINA_RETRY__INITIAL_DELAY": "0.01", "LAMINA_TEST_MARK": mark},
    )
    assert process.returncode == 1, process.stderr
    assert "ended at start" in process.stderr
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _marked(p, mark)]


def _marked(entry: Path, mark: str) -> bool:
    """Whether the process runs with ``LAMINA_TEST_MARK=mark`` (inherited by children)."""
    try:
        return f"LAMINA_TEST_MARK={mark}".encode() in (entry / "environ").read_bytes()
    except OSError:
        return False
