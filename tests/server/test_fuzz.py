"""No input a client can send gets a 5xx or an internal error, on any route: property-based
tests (hypothesis) over JSON-RPC, REST, the legacy 0.1 routes and MCP — bodies, headers, ids,
methods — against real servers on 127.0.0.1 (A2A in this process, MCP as a ``lamina mcp``
process). Bounded: each test runs a fixed number of examples, the whole file in well under
a minute."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.server.harness import Running, mcp_http_process, running_server, server_settings

LIMITS = {"default": {"requests_per_minute": 1_000_000}}
#: Examples per test: bounded for CI; LAMINA_FUZZ_EXAMPLES=2000 for a deeper local run.
EXAMPLES = int(os.environ.get("LAMINA_FUZZ_EXAMPLES", "80"))
BOUNDED = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
TOOLS = [
    "memory_add",
    "memory_search",
    "memory_get",
    "memory_list",
    "memory_update",
    "memory_delete",
    "memory_history",
    "memory_add_messages",
    "knowledge_create",
    "knowledge_get",
    "knowledge_list",
    "knowledge_search",
    "governance_policies",
    "governance_validate",
    "governance_drift",
    "no_such_tool",
]
KEYS = [
    "content",
    "layer",
    "user_id",
    "project_id",
    "agent_id",
    "session_id",
    "team_id",
    "org_id",
    "company_id",
    "query",
    "limit",
    "memory_id",
    "metadata",
    "filters",
    "mode",
    "type",
    "title",
    "body",
    "id",
    "tags",
    "context",
    "contexts",
    "messages",
    "cursor",
]

# -- values a client can put in JSON ---------------------------------------------------

odd_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40
) | st.sampled_from(["", " ", "\x00", "../../etc", "user", "project", "AKIAIOSFODNN7EXAMPLE"])
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | odd_text
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(odd_text, inner, max_size=4),
    max_leaves=12,
)
arguments = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=6) | json_values


@st.composite
def parts(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["tool", "data", "text", "odd"]))
    if kind == "tool":
        return {
            "data": {"tool": draw(st.sampled_from(TOOLS) | odd_text), "arguments": draw(arguments)}
        }
    if kind == "data":
        return {"data": draw(json_values)}
    if kind == "text":
        return {"text": draw(odd_text)}
    return draw(json_values)


ids = odd_text | st.sampled_from([str(uuid.uuid4()), "x" * 300]) | json_values


@st.composite
def messages(draw: st.DrawFn) -> Any:
    message: dict[str, Any] = {
        "messageId": draw(ids),
        "role": draw(st.sampled_from(["ROLE_USER", "ROLE_AGENT", "user", "x", 3])),
        "parts": draw(st.lists(parts(), max_size=3) | json_values),
    }
    for key in ("contextId", "taskId", "metadata", "extensions", "referenceTaskIds"):
        if draw(st.booleans()):
            message[key] = draw(ids if key.endswith("Id") else json_values)
    return draw(st.just(message) | json_values) if draw(st.integers(0, 9)) == 0 else message


def body_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


raw_bodies = st.binary(max_size=200) | st.sampled_from(
    [b"", b"{", b"[" * 5000, b'{"a": NaN}', b'{"a": 1e400}', b"\xff\xfe", b'"\\ud800"']
)
content_types = st.sampled_from(
    [
        "application/json",
        "application/json; charset=utf-8",
        "application/a2a+json",
        "text/plain",
        "",
        "application/json; charset=latin-1",
        "multipart/form-data; boundary=x",
    ]
)
versions = st.sampled_from(["1.0", "0.3", "", "2.0", "abc"])
path_ids = st.text(max_size=30).map(lambda s: quote(s, safe="")) | st.sampled_from(
    ["%00", "%2F", "..", "%FF", "a" * 600]
)


def headers(content_type: str, version: str) -> dict[str, str]:
    out = {"A2A-Version": version} if version else {}
    if content_type:
        out["Content-Type"] = content_type
    return out


def assert_no_server_error(response: httpx.Response) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:500])
    assert "INTERNAL_ERROR" not in response.text, response.text[:1000]


# -- the A2A server ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    settings_ = server_settings(tmp_path_factory.mktemp("fuzz") / "data", tiers=LIMITS)
    with running_server(settings_) as running:
        yield running


@pytest.fixture(scope="module")
def client(live: Running) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=30) as c:
        yield c


METHODS = [
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "GetExtendedAgentCard",
    "CreateTaskPushNotificationConfig",
    "message/send",
    "tasks/get",
    "nope",
]


@st.composite
def rpc_bodies(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 5)) == 0:
        return draw(raw_bodies)
    params: Any = {"message": draw(messages())}
    if draw(st.booleans()):
        params = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "id": ids,
                    "message": messages(),
                    "configuration": json_values,
                    "pageSize": json_values,
                    "pageToken": ids,
                    "contextId": ids,
                    "historyLength": json_values,
                    "metadata": json_values,
                },
            )
        )
    envelope: dict[str, Any] = {
        "jsonrpc": draw(st.sampled_from(["2.0", "1.0", 2])),
        "id": draw(ids),
        "method": draw(st.sampled_from(METHODS) | odd_text),
        "params": params,
    }
    if draw(st.integers(0, 6)) == 0:
        envelope.pop(draw(st.sampled_from(sorted(envelope))))
    return body_bytes(envelope if draw(st.integers(0, 9)) else [envelope])


@BOUNDED
@given(body=rpc_bodies(), content_type=content_types, version=versions)
def test_jsonrpc_never_fails_on_the_server(
    client: httpx.Client, body: bytes, content_type: str, version: str
) -> None:
    assert_no_server_error(client.post("/", content=body, headers=headers(content_type, version)))


REST_POSTS = ["/message:send", "/message:stream", "/tasks/{id}:cancel", "/tasks/{id}:subscribe"]
REST_GETS = ["/tasks/{id}", "/tasks", "/tasks/{id}:subscribe", "/tasks/{id}/get"]


@st.composite
def rest_bodies(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 4)) == 0:
        return draw(raw_bodies)
    body = draw(
        st.fixed_dictionaries(
            {"message": messages()},
            optional={"configuration": json_values, "metadata": json_values, "id": ids},
        )
        | json_values
    )
    return body_bytes(body)


@BOUNDED
@given(
    post=st.booleans(),
    template=st.sampled_from([*REST_POSTS, "/tasks/send", "/v1/message:send"]),
    get_template=st.sampled_from([*REST_GETS, "/v1/tasks/{id}", "/.well-known/agent-card.json"]),
    task_id=path_ids,
    body=rest_bodies(),
    content_type=content_types,
    version=versions,
    query=st.dictionaries(
        st.sampled_from(["contextId", "pageSize", "pageToken", "status", "historyLength", "x"]),
        odd_text,
        max_size=3,
    ),
)
def test_rest_and_legacy_never_fail_on_the_server(
    client: httpx.Client,
    post: bool,
    template: str,
    get_template: str,
    task_id: str,
    body: bytes,
    content_type: str,
    version: str,
    query: dict[str, str],
) -> None:
    sent = headers(content_type, version)
    if post:
        path = template.replace("{id}", task_id)
        response = client.post(path, content=body, headers=sent, params=query)
    else:
        path = get_template.replace("{id}", task_id)
        response = client.get(path, headers=sent, params=query)
    assert_no_server_error(response)


@BOUNDED
@given(
    name=st.sampled_from(["Authorization", "X-API-Key", "A2A-Version", "If-None-Match", "Accept"]),
    value=st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=60).map(
        str.strip
    ),
    path=st.sampled_from(["/", "/message:send", "/tasks/send", "/tasks", "/health", "/metrics"]),
)
def test_odd_headers_never_fail_on_the_server(
    client: httpx.Client, name: str, value: str, path: str
) -> None:
    sent = {"Content-Type": "application/json", name: value}
    body = body_bytes({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}})
    if path in ("/tasks", "/health", "/metrics"):
        response = client.get(path, headers=sent)
    else:
        response = client.post(path, content=body, headers=sent)
    assert_no_server_error(response)


# -- MCP over streamable HTTP (a real `lamina mcp` process) ------------------------------


@pytest.fixture(scope="module")
def mcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The MCP endpoint's URL and a session id of an initialized session."""
    config = tmp_path_factory.mktemp("mcp") / "lamina.toml"
    config.write_text("[server.tiers.default]\nrequests_per_minute = 1000000\n", encoding="utf-8")
    with mcp_http_process(config.parent / "d", config) as url:
        accept = {"Accept": "application/json, text/event-stream"}
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "fuzz", "version": "1"},
            },
        }
        response = httpx.post(url, json=init, headers=accept, timeout=30)
        assert response.status_code == 200, response.text
        session = response.headers["mcp-session-id"]
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        httpx.post(url, json=done, headers={**accept, "mcp-session-id": session}, timeout=30)
        yield url, session


@st.composite
def mcp_bodies(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 5)) == 0:
        return draw(raw_bodies)
    method = draw(
        st.sampled_from(["tools/call", "tools/call", "tools/list", "initialize", "ping"]) | odd_text
    )
    params: Any = {"name": draw(st.sampled_from(TOOLS) | odd_text), "arguments": draw(arguments)}
    if draw(st.integers(0, 4)) == 0:
        params = draw(json_values)
    envelope = {"jsonrpc": "2.0", "id": draw(ids), "method": method, "params": params}
    return body_bytes(envelope)


@BOUNDED
@given(
    body=mcp_bodies(),
    with_session=st.integers(0, 3),
    session_id=st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=40),
    accept=st.sampled_from(["application/json, text/event-stream", "application/json", ""]),
    content_type=content_types,
)
def test_mcp_never_fails_on_the_server(
    mcp: tuple[str, str],
    body: bytes,
    with_session: int,
    session_id: str,
    accept: str,
    content_type: str,
) -> None:
    url, session = mcp
    sent = headers(content_type, "")
    if accept:
        sent["Accept"] = accept
    if with_session:
        sent["mcp-session-id"] = session if with_session > 1 else session_id
    response = httpx.post(url, content=body, headers=sent, timeout=30)
    assert_no_server_error(response)


def test_the_servers_still_serve(client: httpx.Client, mcp: tuple[str, str]) -> None:
    """After the fuzzing, both answer a plain request."""
    response = client.post(
        "/",
        json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}},
        headers={"A2A-Version": "1.0"},
    )
    assert response.status_code == 200 and "result" in response.json()
    url, session = mcp
    listed = httpx.post(
        url,
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        headers={"Accept": "application/json, text/event-stream", "mcp-session-id": session},
        timeout=30,
    )
    assert listed.status_code == 200 and "memory_add" in listed.text
