"""The A2A routes take JSON bodies only (415, A2A's ContentTypeNotSupportedError, in the
route's protocol); other routes and bodiless requests are not asked for a type."""

from __future__ import annotations

import json

import pytest
from starlette.middleware import Middleware

from lamina.server.middleware import BodyLimit, BufferBody, JsonContentType
from tests.server.middleware.support import call, rpc, seen, stack

TYPED = stack(
    Middleware(BufferBody, max_bytes=1000), Middleware(BodyLimit), Middleware(JsonContentType)
)
BODY = json.dumps(rpc("r-3")).encode()


@pytest.mark.parametrize(
    "content_type", ["application/json", "application/json; charset=utf-8", "Application/A2A+JSON"]
)
def test_json_types_pass(content_type: str) -> None:
    response = call(TYPED, "POST", "/", content=BODY, headers={"content-type": content_type})
    assert seen(response)["chunks"] == [BODY.decode()]


def test_json_rpc_with_another_type_gets_415_with_its_id() -> None:
    response = call(TYPED, "POST", "/", content=BODY, headers={"content-type": "text/plain"})
    assert response.status_code == 415
    envelope = response.json()
    assert envelope["id"] == "r-3"
    assert envelope["error"]["code"] == -32005
    assert envelope["error"]["data"] == {
        "reason": "CONTENT_TYPE_NOT_SUPPORTED",
        "contentType": "text/plain",
        "supported": ["application/json", "application/a2a+json"],
    }


def test_an_untyped_rest_body_gets_the_a2a_error_info() -> None:
    response = call(TYPED, "POST", "/message:send", content=BODY)
    assert response.status_code == 415
    error = response.json()["error"]
    assert error["message"] == (
        "the request body must be JSON (Content-Type: application/json), not untyped"
    )
    info = error["details"][0]
    assert (info["reason"], info["domain"]) == ("CONTENT_TYPE_NOT_SUPPORTED", "a2a-protocol.org")


def test_other_routes_and_empty_bodies_are_not_asked_for_a_type() -> None:
    mcp = call(TYPED, "POST", "/mcp", content=BODY, headers={"content-type": "text/plain"})
    assert seen(mcp)["chunks"] == [BODY.decode()]
    empty = call(TYPED, "POST", "/tasks/send", headers={"content-type": "text/plain"})
    assert seen(empty)["chunks"] == [""]
