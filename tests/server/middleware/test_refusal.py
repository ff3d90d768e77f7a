"""One refusal, rendered in each route group's own protocol: the JSON-RPC envelope with the
request's id, the legacy error, the HTTP+JSON binding's google.rpc.Status with an ErrorInfo
(metadata values as strings), and lamina's own shape on MCP, the card, health and metrics."""

from __future__ import annotations

from typing import Any

import pytest

from lamina.server.middleware.refusal import ERROR_INFO, Refusal, render, rpc_id

SLOW = Refusal(
    429,
    "RATE_LIMITED",
    -32092,
    "RESOURCE_EXHAUSTED",
    "slow down",
    data={"limit": "total", "requestsPerMinute": 2},
    headers={"retry-after": "7"},
)


def test_jsonrpc_gets_an_envelope_with_the_request_id() -> None:
    assert render("jsonrpc", SLOW, "r-9") == {
        "jsonrpc": "2.0",
        "id": "r-9",
        "error": {
            "code": -32092,
            "message": "slow down",
            "data": {"reason": "RATE_LIMITED", "limit": "total", "requestsPerMinute": 2},
        },
    }


def test_legacy_gets_the_error_without_an_envelope() -> None:
    error = render("legacy", SLOW, None)["error"]
    assert error == {
        "code": -32092,
        "message": "slow down",
        "data": {"reason": "RATE_LIMITED", "limit": "total", "requestsPerMinute": 2},
    }


def test_rest_gets_a_status_with_an_error_info_of_strings() -> None:
    assert render("rest", SLOW, "ignored") == {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "message": "slow down",
            "details": [
                {
                    "@type": ERROR_INFO,
                    "reason": "RATE_LIMITED",
                    "domain": "lamina",
                    "metadata": {"limit": "total", "requestsPerMinute": "2"},
                }
            ],
        }
    }


@pytest.mark.parametrize("group", ["mcp", "card", "health", "metrics"])
def test_other_routes_get_lamina_s_own_shape(group: str) -> None:
    assert render(group, SLOW, "ignored") == {
        "error": {
            "code": "RATE_LIMITED",
            "message": "slow down",
            "details": {"limit": "total", "requestsPerMinute": 2},
        }
    }


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"id": "a"}, "a"),
        ({"id": 3}, 3),
        ({"id": 2.5}, 2.5),
        ({"id": True}, None),
        ({"id": ["a"]}, None),
        ({"id": None}, None),
        ([{"id": "a"}], None),
        ("id", None),
    ],
)
def test_only_a_string_or_number_id_is_answered(body: Any, expected: Any) -> None:
    assert rpc_id(body) == expected
