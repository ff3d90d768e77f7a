"""`lamina mcp` over stdio answers a client's first `initialize` before the mcp SDK is
imported (issue 35, requirement 3): that answer is, byte for byte, the one the SDK gives; the
SDK's own answer to it is not written again; anything but a plain `initialize` is the SDK's
to answer; and the table behind it is the installed SDK's."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

import lamina
from lamina.config import load_settings
from lamina.server.defaults import IdentifierDefaults, instructions
from lamina.server.mcp_stdio import HANDSHAKE_VERSIONS, SDK_RELEASES, Handshake
from tests.server.mcp_support import LAMINA

#: A default user whose name JSON must escape (quotes, a backslash) or may keep as it is.
USER = 'Zoë "q" \\/ü€𝄞'


def initialize(ident: int | str, protocol: str, **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "initialize",
        "params": {
            "protocolVersion": protocol,
            "capabilities": {"roots": {"listChanged": True}, "sampling": {}},
            "clientInfo": {"name": "test", "version": "1", "title": "Tést"},
            **params,
        },
    }


#: One plain initialize per version the SDK negotiates, one it does not know (it answers its
#: latest), one of the stateless era (the same), integer and string ids.
PLAIN = [
    initialize(i if i % 2 else f"id-{i}", protocol)
    for i, protocol in enumerate([*HANDSHAKE_PROTOCOL_VERSIONS, "2026-07-28", "1999-01-01"], 1)
]
#: What the SDK answers itself (an error, or a result from a request it reads otherwise).
NOT_PLAIN = [
    initialize(20, "2025-06-18", capabilities={"roots": 5}),
    initialize(21, "2025-06-18", clientInfo={"name": "test"}),
    initialize(22, "2025-06-18", _meta={"progressToken": 1}),
    {"jsonrpc": "2.0", "id": 23, "method": "initialize"},
    # capabilities the SDK refuses (or may): its error, not a success, is the answer
    initialize(24, "2025-06-18", capabilities={"experimental": {"x": 1}}),
    initialize(25, "2025-06-18", capabilities={"roots": {"listChanged": 5}}),
    initialize(26, "2025-06-18", capabilities={"sampling": {"context": 7}}),
    initialize(27, "2025-06-18", capabilities={"elicitation": {"form": 3}}),
    initialize(28, "2025-06-18", capabilities={"tasks": {"list": 3}}),
]


@contextmanager
def server(tmp_path: Path, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[str]]:
    command = [str(LAMINA), "--data-dir", str(tmp_path / "d"), "mcp", "--user-id", USER]
    with subprocess.Popen(
        command,
        env={**os.environ, **(env or {})},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        encoding="utf-8",
    ) as process:
        try:
            yield process
        finally:
            process.kill()


def ask(process: subprocess.Popen[str], *messages: dict[str, Any]) -> str:
    """Write ``messages``; the next line the server writes."""
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("".join(json.dumps(m, ensure_ascii=False) + "\n" for m in messages))
    process.stdin.flush()
    return process.stdout.readline()


def test_the_table_is_the_installed_sdks() -> None:
    assert HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS
    assert HANDSHAKE_VERSIONS[-1] == LATEST_HANDSHAKE_VERSION
    for name, releases in SDK_RELEASES.items():
        # another release: check this test passes with it, then add it to SDK_RELEASES
        assert version(name) in releases, name


def test_the_first_initialize_is_answered_as_the_sdk_answers_it(tmp_path: Path) -> None:
    settings = load_settings(None, data_dir=tmp_path / "d")
    defaults = IdentifierDefaults({**settings.mcp.identifiers(), "user_id": USER})
    ours = Handshake(instructions(defaults), lamina.__version__)
    with server(tmp_path) as sdk:  # a ping first: the SDK answers every initialize
        assert json.loads(ask(sdk, {"jsonrpc": "2.0", "id": 0, "method": "ping"}))["id"] == 0
        for message in PLAIN:
            answer = ours.answer(json.dumps(message, ensure_ascii=False))
            assert answer == (ask(sdk, message), message["id"])
        for message in NOT_PLAIN:
            assert ours.answer(json.dumps(message)) is None
            assert json.loads(ask(sdk, message))["id"] == message["id"]
    expected = ours.answer(json.dumps(PLAIN[2], ensure_ascii=False))
    assert expected is not None
    with server(tmp_path) as fast:  # answered by lamina, then read by the SDK: one answer
        assert ask(fast, PLAIN[2]) == expected[0]
        listed = ask(
            fast,
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": "list", "method": "tools/list"},
        )
        assert json.loads(listed)["id"] == "list"
        assert "memory_search" in {t["name"] for t in json.loads(listed)["result"]["tools"]}


def test_initialize_is_answered_while_the_sdk_cannot_even_be_imported(tmp_path: Path) -> None:
    """An mcp package whose import never ends, ahead of the real one: the answer comes."""
    stub = tmp_path / "stub" / "mcp"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("import threading\nthreading.Event().wait()\n")
    path = os.pathsep.join([str(stub.parent), os.environ.get("PYTHONPATH", "")])
    with server(tmp_path, {"PYTHONPATH": path}) as blocked:
        answer = json.loads(ask(blocked, PLAIN[0]))
    assert answer["id"] == PLAIN[0]["id"]
    assert answer["result"]["serverInfo"] == {"name": "lamina", "version": lamina.__version__}


@pytest.mark.parametrize(
    "line",
    [
        "",
        "{",
        "[]",
        json.dumps({"id": 1, "method": "initialize"}),
        json.dumps({**initialize(1, "2025-06-18"), "id": True}),
        json.dumps({**initialize(1, "2025-06-18"), "id": 1.5}),
        # JSON the SDK does not read: a lone surrogate (escaped), NaN
        json.dumps(initialize("a\ud800", "2025-06-18")),
        json.dumps(initialize(1, "2025-06-18", capabilities={"experimental": {"x": {"v": 1e999}}})),
    ],
)
def test_what_is_not_json_rpc_is_not_answered_here(line: str) -> None:
    assert Handshake("x", "0").answer(line) is None


def test_a_first_line_the_sdk_cannot_read_leaves_the_server_serving(tmp_path: Path) -> None:
    """A first initialize with an escaped lone surrogate as its id is the SDK's to handle;
    the server then goes on reading (it stopped silently, exit 0, when answering it here
    failed to encode the id)."""
    with server(tmp_path) as process:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(initialize("a\ud800", "2025-06-18")) + "\n")
        process.stdin.write(json.dumps(PLAIN[0]) + "\n")
        process.stdin.flush()
        # The SDK drops the line it cannot read and answers the next (before the fix the
        # server had stopped: an empty read here).
        answer = json.loads(process.stdout.readline())
        assert answer["id"] == PLAIN[0]["id"] and "result" in answer


def test_pipelined_requests_are_all_answered_in_order(tmp_path: Path) -> None:
    """More than the pipes hold, written while the answers are read: each answered, in
    order, through the lines kept while the SDK loaded and the ones read after."""
    pings = [{"jsonrpc": "2.0", "id": n, "method": "ping"} for n in range(3000)]
    with server(tmp_path) as process:
        stdin, stdout = process.stdin, process.stdout
        assert stdin is not None and stdout is not None
        text = "".join(json.dumps(m) + "\n" for m in [PLAIN[0], *pings])
        writer = threading.Thread(target=lambda: (stdin.write(text), stdin.flush()))
        writer.start()
        assert json.loads(stdout.readline())["id"] == PLAIN[0]["id"]
        answers = [json.loads(stdout.readline())["id"] for _ in pings]
        writer.join()
    assert answers == list(range(3000))
