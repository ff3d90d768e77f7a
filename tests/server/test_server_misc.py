"""Bad input at the HTTP edge, health and metrics, the LLM router, registering a tool, the
error mapping, the ecosystem adapters, the official a2a-sdk client, and the SDK boundary."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from lamina.errors import ErrorCode
from lamina.llm.openai_chat import OpenAIChatModel
from lamina.server.skills import TASK_STATE_OF
from lamina.server.tools import ServerTool
from tests.fakes.openai_server import FakeOpenAI
from tests.server.harness import (
    HEADERS,
    Running,
    result_of,
    running_server,
    send,
    server_settings,
    sse_events,
    text_message,
    tool_message,
)

SRC = Path(__file__).resolve().parents[2] / "src" / "lamina"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    settings = server_settings(tmp_path_factory.mktemp("misc") / "data", max_body_bytes=20_000)
    with running_server(settings) as running:
        yield running


def _error(task: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = task["status"]["message"]["parts"][1]["data"]["error"]
    return data


def test_bad_tool_calls_are_rejected_with_their_code(client: httpx.Client) -> None:
    unknown = send(client, tool_message("memory_teleport", {}))
    assert unknown["status"]["state"] == "TASK_STATE_REJECTED"
    assert _error(unknown)["code"] == "UNKNOWN_TOOL"
    assert "memory_add" in _error(unknown)["details"]["tools"]
    wrong = send(
        client, tool_message("memory_search", {"query": "x", "user_id": "u", "limit": "many"})
    )
    assert wrong["status"]["state"] == "TASK_STATE_REJECTED"
    assert _error(wrong)["code"] == "INVALID_ARGUMENT"
    assert _error(wrong)["details"]["field"] == "limit"
    extra = send(client, tool_message("memory_get", {"memory_id": "x", "sudo": True}))
    assert _error(extra)["details"]["field"] == "sudo"
    layer = send(
        client, tool_message("memory_add", {"content": "c", "layer": "galaxy", "user_id": "u"})
    )
    assert _error(layer)["code"] == "INVALID_LAYER"
    for parts in (
        [{"data": {"tool": 5}}],
        [{"data": {"tool": "memory_get", "arguments": [1]}}],
        [{"data": {"tool": "memory_get"}}, {"data": {"tool": "memory_list"}}],
    ):
        message = {"messageId": "bad", "role": "ROLE_USER", "parts": parts}
        task = send(client, message)
        assert task["status"]["state"] == "TASK_STATE_REJECTED", parts
        assert _error(task)["code"] == "INVALID_ARGUMENT"
    secret = send(
        client,
        tool_message(
            "memory_add",
            {"content": "key AKIAABCDEFGHIJKLMNOP", "layer": "project", "project_id": "p"},
        ),
    )
    assert _error(secret)["code"] == "POLICY_VIOLATION"
    empty = send(client, {"messageId": "e", "role": "ROLE_USER", "parts": [{"text": "  "}]})
    assert _error(empty)["code"] == "INVALID_ARGUMENT"
    # Nothing of it was stored.
    listed = result_of(
        send(client, tool_message("memory_list", {"user_id": "u", "project_id": "p"}))
    )
    assert listed["items"] == []


def test_oversized_and_malformed_bodies(client: httpx.Client) -> None:
    huge = tool_message("memory_add", {"content": "x" * 30_000, "layer": "user", "user_id": "u"})
    envelope = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": huge}}
    response = client.post("/", json=envelope, headers=HEADERS)
    assert response.status_code == 413
    assert response.json()["error"]["data"]["reason"] == "PAYLOAD_TOO_LARGE"

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while reading
        for _ in range(30):
            yield b"x" * 1000

    assert client.post("/", content=chunks(), headers=HEADERS).status_code == 413
    for body in (
        b"",
        b"[]",
        b'"x"',
        b'{"jsonrpc": "2.0"}',
        b'{"jsonrpc":"2.0","id":{},"method":"SendMessage","params":{}}',
        b"\xff\xfe",
    ):
        response = client.post(
            "/", content=body, headers={**HEADERS, "Content-Type": "application/json"}
        )
        assert response.status_code in (200, 400), body
        assert "error" in response.json(), body
    as_json = {**HEADERS, "Content-Type": "application/json"}
    assert client.post("/message:send", content=b"{oops", headers=as_json).status_code == 400
    # Still serving.
    assert send(client, tool_message("memory_list", {"user_id": "u"}))["status"]["state"] == (
        "TASK_STATE_COMPLETED"
    )


def test_many_sse_subscribers_and_clients_that_hang_up(live: Running) -> None:
    def stream(i: int) -> int:
        with httpx.Client(base_url=live.url, timeout=60) as c:
            message = tool_message(
                "memory_add", {"content": f"sse {i}", "layer": "user", "user_id": "sse"}
            )
            return len(sse_events(c, "SendStreamingMessage", {"message": message}))

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        counts = list(pool.map(stream, range(32)))
    assert all(n >= 4 for n in counts)
    # Clients that read one event and disconnect.
    for i in range(10):
        with (
            httpx.Client(base_url=live.url, timeout=30) as c,
            c.stream(
                "POST",
                "/",
                headers={**HEADERS, "Accept": "text/event-stream"},
                json={
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "SendStreamingMessage",
                    "params": {
                        "message": tool_message(
                            "memory_add",
                            {"content": f"gone {i}", "layer": "user", "user_id": "sse"},
                        )
                    },
                },
            ) as response,
        ):
            next(response.iter_lines())
    with httpx.Client(base_url=live.url, timeout=30) as c:
        items = result_of(send(c, tool_message("memory_list", {"user_id": "sse", "limit": 100})))[
            "items"
        ]
        contents = {m["content"] for m in items}
        assert {f"sse {i}" for i in range(32)} <= contents
        assert c.get("/health").status_code == 200


def test_health_and_metrics(live: Running, client: httpx.Client) -> None:
    report = client.get("/health").json()
    assert report["status"] == "up"
    assert set(report["checks"]) == {
        "database",
        "memory_store",
        "knowledge_repository",
        "embedder",
        "threads",
    }
    assert all(c["status"] == "up" for c in report["checks"].values())
    send(client, tool_message("memory_list", {"user_id": "m"}))
    send(client, tool_message("memory_update", {"memory_id": "nope", "content": "x"}))
    text = client.get("/metrics").text
    assert re.search(
        r'a2a_requests_total\{outcome="completed",skill="memory",'
        r'tool="memory_list"\} [1-9]',
        text,
    )
    assert 'a2a_errors_total{code="MEMORY_NOT_FOUND",skill="memory"}' in text
    assert 'a2a_request_latency_seconds_bucket{le="0.1",skill="memory"}' in text
    assert "memory_operations_total" in text and "a2a_threads_active" in text
    assert 'a2a_thread_cleanup_total{kind="threads_expired"}' in text
    assert 'a2a_http_requests_total{route="jsonrpc",status="200"}' in text


def test_health_is_503_when_a_dependency_is_down(tmp_path: Path) -> None:
    settings = server_settings(tmp_path / "d")
    with running_server(settings) as live, httpx.Client(base_url=live.url, timeout=30) as c:
        created = send(
            c,
            tool_message(
                "knowledge_create", {"type": "adr", "title": "T", "layer": "company", "id": "adr-1"}
            ),
        )
        assert created["status"]["state"] == "TASK_STATE_COMPLETED"
        objects = tmp_path / "d" / "knowledge" / "default.git" / "objects"
        shutil.rmtree(objects)
        objects.mkdir()
        response = c.get("/health")
        assert response.status_code == 503
        checks = response.json()["checks"]
        assert checks["knowledge_repository"]["status"] == "down"
        assert checks["database"]["status"] == "up"


def test_llm_router_routes_free_text_with_only_the_tool_catalogue(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        fake.reply = lambda body: json.dumps(
            {
                "tool": "memory_add",
                "arguments": {"content": "Carol likes tea", "layer": "user", "user_id": "carol"},
            }
        )
        model = OpenAIChatModel(model="cheap-router", base_url=fake.base_url, api_key="k")
        settings = server_settings(tmp_path / "d")
        with (
            running_server(settings, router_model=model) as live,
            httpx.Client(base_url=live.url, timeout=30) as c,
        ):
            task = send(c, text_message("remember that Carol likes tea"))
            assert task["status"]["state"] == "TASK_STATE_COMPLETED"
            assert result_of(task)["content"] == "Carol likes tea"
            [request] = fake.chat_requests
            assert request["model"] == "cheap-router"
            system = request["messages"][0]["content"]
            assert "memory_add" in system and "governance_drift" in system
            assert request["messages"][1:] == [
                {"role": "user", "content": "remember that Carol likes tea"}
            ]
            fake.reply = lambda body: "not json at all"
            fallback = send(c, text_message("tea", metadata={"user_id": "carol"}))
            assert result_of(fallback)["mode"] == "search"
            fake.reply = lambda body: json.dumps({"tool": None, "reply": "Hello!"})
            chat = send(c, text_message("hi"))
            assert result_of(chat) == {"reply": "Hello!"}


def test_registering_a_tool_updates_the_card_and_it_runs(
    live: Running, client: httpx.Client
) -> None:
    class Echo(BaseModel):
        text: str

    async def handler(args: Any, tenant: str) -> Any:
        return {"echo": args.text, "tenant": tenant}

    before = client.get("/.well-known/agent-card.json").json()
    live.server.register_tool(
        ServerTool("util_echo", "util", "Echo text back.", Echo, handler, True)
    )
    card = client.get("/.well-known/agent-card.json").json()
    assert "util" in {s["id"] for s in card["skills"]}
    assert (
        len(card["capabilities"]["extensions"][0]["params"]["tools"])
        == len(before["capabilities"]["extensions"][0]["params"]["tools"]) + 1
    )
    task = send(client, tool_message("util_echo", {"text": "hi"}))
    assert result_of(task) == {"echo": "hi", "tenant": "default"}
    live.server.registry.unregister("util_echo")


def test_every_error_code_has_a_task_outcome() -> None:
    assert set(TASK_STATE_OF) == set(ErrorCode)


def test_internal_errors_fail_the_task_without_details(
    live: Running, client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    class Nothing(BaseModel):
        pass

    async def broken(args: Any, tenant: str) -> Any:
        raise RuntimeError("secret stack detail /etc/passwd")

    live.server.register_tool(ServerTool("util_broken", "util", "Fails.", Nothing, broken, True))
    task = send(client, tool_message("util_broken", {}))
    live.server.registry.unregister("util_broken")
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    error = _error(task)
    assert error["code"] == "INTERNAL_ERROR" and "secret" not in json.dumps(task)
    assert any("secret stack detail" in str(r.exc_info) for r in caplog.records if r.exc_info)


def test_adapters_share_one_interface(live: Running) -> None:
    from lamina.server.adapter import EcosystemAdapter
    from lamina.server.mcp_adapter import MCPAdapter

    a2a: EcosystemAdapter = live.server.a2a
    mcp: EcosystemAdapter = MCPAdapter(live.server.ms, live.server.metrics)
    for adapter in (a2a, mcp):
        memory = adapter.get_memory_tools()
        others = adapter.get_knowledge_tools()
        assert len(memory) == 13 and len(others) == 15  # knowledge, governance, context
        context = live.run(adapter.get_session_context("default", {"user_id": "u"}, "x"))
        assert "memories" in context and context["constraints"]
    assert {t.name for t in mcp.get_memory_tools()} == {t["name"] for t in a2a.get_memory_tools()}


def test_only_the_adapters_import_the_sdks() -> None:
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        rel = path.relative_to(SRC).as_posix()
        if re.search(r"^\s*(from|import) a2a\b", text, re.M):
            assert rel.startswith("server/a2a/"), rel
        if re.search(r"^\s*(from|import) mcp\b", text, re.M):
            assert rel in ("server/mcp_server.py", "server/mcp_adapter.py"), rel


def test_the_official_a2a_client(live: Running) -> None:
    from a2a.client import ClientConfig, create_client
    from a2a.helpers.proto_helpers import new_data_part
    from a2a.types import GetTaskRequest, Message, Role, SendMessageRequest

    async def scenario() -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            client = await create_client(live.url, client_config=ClientConfig(httpx_client=http))
            message = Message(
                message_id="sdk-1",
                role=Role.ROLE_USER,
                parts=[
                    new_data_part(
                        {
                            "tool": "memory_add",
                            "arguments": {
                                "content": "via the SDK",
                                "layer": "user",
                                "user_id": "sdk",
                            },
                        }
                    )
                ],
            )
            events = [e async for e in client.send_message(SendMessageRequest(message=message))]
            assert events
            last = events[-1]
            task = last.task if last.HasField("task") else None
            task_id = task.id if task is not None else last.status_update.task_id
            got = await client.get_task(GetTaskRequest(id=task_id))
            assert got.status.state == 3  # TASK_STATE_COMPLETED
            data = got.artifacts[0].parts[0].data.struct_value
            assert data["content"] == "via the SDK"
            await client.close()

    asyncio.run(scenario())
