"""A real lamina server on 127.0.0.1 (uvicorn, ephemeral port) in a background thread,
and helpers to talk JSON-RPC, REST and SSE to it with httpx."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from lamina.config import Settings
from lamina.llm.base import ChatModel
from lamina.runtime import AsyncLamina
from lamina.server.app import LaminaServer
from tests.conftest import fast_settings


@dataclass
class Running:
    url: str
    server: LaminaServer
    loop: asyncio.AbstractEventLoop

    def run(self, coro: Any) -> Any:
        """Run a coroutine on the server's loop (to reach its services directly)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)


@contextmanager
def running_server(
    settings: Settings, *, router_model: ChatModel | None = None
) -> Iterator[Running]:
    ready = threading.Event()
    box: dict[str, Any] = {}

    def main() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)

        async def serve() -> None:
            ms = AsyncLamina(settings)
            server = LaminaServer(ms, router_model=router_model)
            config = uvicorn.Config(
                server.app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"
            )
            uv = uvicorn.Server(config)
            box["uv"], box["server"], box["loop"] = uv, server, loop
            task = asyncio.create_task(uv.serve())
            while not uv.started and not task.done():  # noqa: ASYNC110 (uvicorn has no event)
                await asyncio.sleep(0.01)
            if uv.started:
                box["port"] = uv.servers[0].sockets[0].getsockname()[1]
            ready.set()
            try:
                await task
            finally:
                await ms.close()

        try:
            loop.run_until_complete(serve())
        except BaseException as exc:  # surfaced to the test below
            box["error"] = exc
            ready.set()
        finally:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    ready.wait(60)
    if "port" not in box:
        raise RuntimeError(f"server did not start: {box.get('error')!r}")
    try:
        yield Running(f"http://127.0.0.1:{box['port']}", box["server"], box["loop"])
    finally:
        box["uv"].should_exit = True
        thread.join(30)


@contextmanager
def mcp_http_process(data_dir: Path, config: Path, *args: str) -> Iterator[str]:
    """A ``lamina mcp --transport http`` process on an ephemeral port (``args``: more mcp
    options); its /mcp URL. On exit it is stopped, and must have logged no traceback."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lamina",
            "--data-dir",
            str(data_dir),
            "--config",
            str(config),
            "mcp",
            "--transport",
            "http",
            "--port",
            "0",
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip().split()[-1].rstrip("/") + "/mcp"
    finally:
        process.terminate()
        _, errors = process.communicate(timeout=30)
    assert "Traceback" not in errors, errors[-3000:]


def server_settings(data_dir: Path, **server: Any) -> Settings:
    overrides = server.pop("_settings", {})
    return fast_settings(data_dir, server=server, **overrides)


def tool_message(
    tool: str, arguments: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"data": {"tool": tool, "arguments": arguments or {}}}],
    }
    message.update(extra)
    return message


def text_message(text: str, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    message.update(extra)
    return message


HEADERS = {"A2A-Version": "1.0"}


def rpc(
    client: httpx.Client,
    method: str,
    params: dict[str, Any],
    *,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    response = client.post(
        "/",
        json={"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params},
        headers={**HEADERS, **(headers or {})},
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def send(client: httpx.Client, message: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """SendMessage; the task it returns (asserting there was no error)."""
    body = rpc(client, "SendMessage", {"message": message}, **kw)
    assert "error" not in body, body
    task: dict[str, Any] = body["result"]["task"]
    return task


def result_of(task: dict[str, Any]) -> Any:
    """The data of the task's result artifact (not its session_context artifact)."""
    found = [a for a in task["artifacts"] if a.get("name") != "session_context"]
    return found[-1]["parts"][0]["data"]


def session_of(task: dict[str, Any]) -> Any:
    found = [a for a in task.get("artifacts", []) if a.get("name") == "session_context"]
    return found[0]["parts"][0]["data"] if found else None


def sse_events(
    client: httpx.Client, method: str, params: dict[str, Any], headers: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    events = []
    with client.stream(
        "POST",
        "/",
        json={"jsonrpc": "2.0", "id": "s1", "method": method, "params": params},
        headers={**HEADERS, "Accept": "text/event-stream", **(headers or {})},
    ) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line[5:].strip()))
    return events
