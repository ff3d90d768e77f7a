"""Bodies and ids a client gets wrong: deeply nested JSON, NaN and Infinity, numbers no double
holds, invalid UTF-8, lone surrogates, odd legacy parts and metadata, NUL characters in task
and context ids. Each is answered with a clear error in the route's protocol (a JSON-RPC error
envelope, the HTTP+JSON 400, the legacy 400), never a 500, and logged without a traceback
below ERROR. The NUL ids run on SQLite and on PostgreSQL."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.pg import empty_database, require_postgres
from tests.server.harness import (
    HEADERS,
    Running,
    rpc,
    running_server,
    send,
    server_settings,
    text_message,
    tool_message,
)

LIMITS = {"default": {"requests_per_minute": 10_000}}
DEEP = b"[" * 100_000
# Nested deeper than protobuf converts (100), shallow enough for the JSON parser.
NESTED = "[" * 300 + "]" * 300
# JSON numbers that are not numbers a double can hold, or not JSON at all.
NUMBERS = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1" + "0" * 400]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    settings = server_settings(tmp_path_factory.mktemp("bad") / "data", tiers=LIMITS)
    with running_server(settings) as running:
        yield running


@pytest.fixture
def quiet(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """No record logged during the test may be an ERROR or carry a traceback."""
    with caplog.at_level(logging.INFO):
        yield
    records = caplog.get_records("call")
    loud = [r for r in records if r.levelno >= logging.ERROR or r.exc_info]
    assert not loud, [f"{r.levelname} {r.name}: {r.getMessage()[:200]}" for r in loud]


def post(client: httpx.Client, path: str, body: bytes | str) -> httpx.Response:
    raw = body.encode() if isinstance(body, str) else body
    return client.post(path, content=raw, headers={**HEADERS, "Content-Type": "application/json"})


def rpc_error(response: httpx.Response, *codes: int) -> str:
    """The message (and data) of a JSON-RPC error envelope with one of ``codes``."""
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["jsonrpc"] == "2.0" and "result" not in body, body
    assert body["error"]["code"] in codes, body
    return f"{body['error']['message']} {json.dumps(body['error'].get('data'))}"


def rest_error(response: httpx.Response) -> str:
    """The message of an HTTP+JSON 400 (google.rpc.Status shape)."""
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT", error
    message: str = error["message"]
    return message


def legacy_error(response: httpx.Response) -> str:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] in (-32700, -32602), error
    message: str = error["message"]
    return message


def rpc_body(params: str, method: str = "SendMessage") -> str:
    return f'{{"jsonrpc": "2.0", "id": "b1", "method": "{method}", "params": {params}}}'


def message_json(data: str = "{}", metadata: str = "{}") -> str:
    """A 1.0 SendMessage params object, ``data`` and ``metadata`` spliced in as raw JSON."""
    return (
        f'{{"message": {{"messageId": "m-1", "role": "ROLE_USER", "metadata": {metadata}, '
        f'"parts": [{{"data": {{"tool": "memory_list", "arguments": {data}}}}}]}}}}'
    )


# -- 1. deeply nested JSON on every POST route ------------------------------------------


def test_deeply_nested_json_is_a_parse_error_on_every_post_route(
    client: httpx.Client, quiet: None
) -> None:
    assert "nested too deeply" in rpc_error(post(client, "/", DEEP), -32700)
    for path in ("/message:send", "/message:stream", "/tasks/t-1:cancel"):
        assert "nested too deeply" in rest_error(post(client, path, DEEP)), path
    assert "nested too deeply" in legacy_error(post(client, "/tasks/send", DEEP))
    # Still serving.
    done = send(client, tool_message("memory_list", {"user_id": "u"}))
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"


def test_nesting_deeper_than_protobuf_converts_is_invalid_params(
    client: httpx.Client, quiet: None
) -> None:
    body = message_json(data=f'{{"a": {NESTED}}}')
    assert "too deep" in rpc_error(post(client, "/", rpc_body(body)), -32602, -32600)
    assert "too deep" in rest_error(post(client, "/message:send", body))
    meta = message_json(metadata=f'{{"a": {NESTED}}}')
    assert "too deep" in rpc_error(post(client, "/", rpc_body(meta)), -32602, -32600)


# -- 2. legacy /tasks/send: odd data parts and metadata ---------------------------------


def legacy(part: str = '{"type": "text", "text": "hi"}', metadata: str | None = None) -> str:
    meta = "" if metadata is None else f', "metadata": {metadata}'
    return f'{{"message": {{"parts": [{part}]}}{meta}}}'


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (legacy('{"type": "data", "data": [1, 2]}'), "must be a JSON object, got list"),
        (legacy('{"type": "data", "data": "x"}'), "must be a JSON object, got str"),
        (legacy('{"type": "data", "data": null}'), "must be a JSON object, got NoneType"),
        (legacy('{"data": 5}'), "must be a JSON object, got int"),
        (legacy(metadata="[1]"), "metadata must be a JSON object, got list"),
        (legacy(metadata='"x"'), "metadata must be a JSON object, got str"),
        (legacy(f'{{"type": "data", "data": {{"a": {NESTED}}}}}'), "too deep"),
        (legacy(metadata=f'{{"a": {NESTED}}}'), "too deep"),
        *[(legacy(f'{{"type": "data", "data": {{"x": {n}}}}}'), "number") for n in NUMBERS],
        *[(legacy(metadata=f'{{"x": {n}}}'), "number") for n in NUMBERS],
        (legacy('{"type": "text", "text": "\\ud800"}'), "surrogate"),
        (legacy('{"type": "data", "data": {"\\udc00": 1}}'), "surrogate"),
    ],
)
def test_legacy_send_rejects_odd_parts_and_metadata(
    client: httpx.Client, quiet: None, body: str, says: str
) -> None:
    assert says in legacy_error(post(client, "/tasks/send", body))


def test_legacy_send_as_json_rpc_answers_an_envelope(client: httpx.Client, quiet: None) -> None:
    body = f'{{"jsonrpc": "2.0", "id": 9, "params": {legacy(metadata="[1]")}}}'
    response = post(client, "/tasks/send", body)
    assert response.status_code == 200, response.text
    assert response.json()["id"] == 9
    assert response.json()["error"]["code"] == -32602
    # A well-formed one still works.
    good = post(client, "/tasks/send", legacy('{"type": "data", "data": {"a": [1, {"b": 2}]}}'))
    assert good.status_code == 200, good.text


# -- 3. NaN, Infinity, 1e400 and invalid UTF-8 on /message:send and SendMessage ---------


@pytest.mark.parametrize("number", NUMBERS)
def test_numbers_no_double_holds_are_rejected(
    client: httpx.Client, quiet: None, number: str
) -> None:
    body = message_json(data=f'{{"limit": {number}}}')
    assert "number" in rest_error(post(client, "/message:send", body))
    assert "number" in rpc_error(post(client, "/", rpc_body(body)), -32700, -32602)
    meta = message_json(metadata=f'{{"user_id": "u", "x": {number}}}')
    assert "number" in rest_error(post(client, "/message:send", meta))
    assert "number" in rpc_error(post(client, "/", rpc_body(meta)), -32700, -32602)


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"\xff\xfe", "UTF-8"),
        (b"\xc3\x28", "UTF-8"),
        (b"\xed\xa0\x80", "UTF-8"),  # a surrogate encoded in UTF-8
        (b"\\ud800", "surrogate"),
        (b"\\udfff tail", "surrogate"),
    ],
)
def test_text_that_is_not_unicode_is_rejected(
    client: httpx.Client, quiet: None, raw: bytes, says: str
) -> None:
    params = (
        b'{"message": {"messageId": "m-2", "role": "ROLE_USER", "parts": [{"text": "'
        + raw
        + b'"}]}}'
    )
    assert says in rest_error(post(client, "/message:send", params))
    envelope = b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": ' + params + b"}"
    assert says in rpc_error(post(client, "/", envelope), -32700)


def test_valid_numbers_and_escapes_still_pass(client: httpx.Client) -> None:
    task = send(
        client,
        text_message(
            "what did \U0001f600 say?", metadata={"user_id": "u", "big": 1.7e308, "n": -(10**300)}
        ),
    )
    assert task["status"]["state"] in ("TASK_STATE_COMPLETED", "TASK_STATE_REJECTED"), task
    escaped = post(
        client,
        "/message:send",
        '{"message": {"messageId": "m-3", "role": "ROLE_USER", '
        '"parts": [{"text": "\\ud83d\\ude00 \\u00e9"}], "metadata": {"user_id": "u"}}}',
    )
    assert escaped.status_code == 200, escaped.text


def test_whole_number_query_parameters_are_checked(client: httpx.Client, quiet: None) -> None:
    """Found by tests/server/test_fuzz.py: the SDK's 0.3 REST GetTask called int() on
    historyLength (a 500 for ``?historyLength=:``)."""
    for path, version in (("/v1/tasks/t-1", "0.3"), ("/tasks/t-1", "1.0"), ("/tasks", "1.0")):
        for value in (":", "1e3", " 2", "9" * 30):
            response = client.get(
                path, params={"historyLength": value}, headers={"A2A-Version": version}
            )
            assert response.status_code == 400, (path, value, response.text)
            assert "historyLength must be a whole number" in rest_error(response)
    for value in ("x", "-"):
        response = client.get("/tasks", params={"pageSize": value}, headers=HEADERS)
        assert "pageSize must be a whole number" in rest_error(response)
    found = client.get(
        "/v1/tasks/t-1", params={"historyLength": "2"}, headers={"A2A-Version": "0.3"}
    )
    assert found.status_code == 404, found.text


# -- 4. NUL characters in task and context ids, on every backend ------------------------


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Running]:
    overrides: dict[str, Any] = {}
    if request.param == "postgres":
        url = require_postgres()
        empty_database(url)
        overrides = {"database_url": url}
    data = tmp_path_factory.mktemp(f"nul-{request.param}") / "data"
    settings = server_settings(Path(data), tiers=LIMITS, _settings=overrides)
    with running_server(settings) as running:
        yield running


@pytest.fixture
def any_backend(backend: Running) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=backend.url, timeout=30) as c:
        yield c


def _cursor(task_id: str, ts: int | None = 1) -> str:
    raw = json.dumps({"ts": ts, "id": task_id}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_nul_in_a_task_id_is_not_found(any_backend: httpx.Client, quiet: None) -> None:
    client = any_backend
    for path in ("/tasks/%00", "/tasks/a%00b", "/tasks/a%00b/get"):
        response = client.get(path, headers=HEADERS)
        assert response.status_code == 404, (path, response.text)
    assert client.post("/tasks/a%00b:cancel", headers=HEADERS).status_code == 404
    for method in ("GetTask", "CancelTask"):
        body = rpc(client, method, {"id": "a\u0000b"})
        assert body["error"]["code"] == -32001, body
    reply = text_message("hello", taskId="a\u0000b")
    assert rpc(client, "SendMessage", {"message": reply})["error"]["code"] == -32001


def test_nul_in_a_context_id_lists_nothing_and_opens_no_thread(
    any_backend: httpx.Client, quiet: None
) -> None:
    client = any_backend
    listed = rpc(client, "ListTasks", {"contextId": "a\u0000b"})["result"]
    assert listed["tasks"] == [] and listed["totalSize"] == 0, listed
    rest = client.get("/tasks", params={"contextId": "a\u0000b"}, headers=HEADERS)
    assert rest.status_code == 200 and rest.json()["tasks"] == [], rest.text
    body = rpc(client, "SendMessage", {"message": text_message("hi", contextId="x\u0000")})
    assert body["error"]["code"] == -32602, body
    assert "contextId" in body["error"]["message"]
    for token in (_cursor("a\u0000b"), _cursor("\ud800"), _cursor("t", 10**30)):
        body = rpc(client, "ListTasks", {"pageToken": token})
        assert body["error"]["code"] == -32602, body
    # The thread and its tasks still work with a good id.
    done = send(client, tool_message("memory_list", {"user_id": "u"}, contextId="ctx-ok"))
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert rpc(client, "GetTask", {"id": done["id"]})["result"]["id"] == done["id"]
