"""What the gate's middlewares share about a request: its route group, each answered in its
own protocol (``jsonrpc``: ``POST /``; ``rest``: the HTTP+JSON binding; ``legacy``:
``/tasks/send``, ``/tasks/{id}/get``; ``mcp``; ``ui``: the web inspector; ``card``, ``health``
and ``metrics``), whether the gate checks it, its headers, and the keys of the scope the
middlewares fill in for the app."""

from __future__ import annotations

from starlette.types import Scope

#: The caller (lamina.server.auth.Principal): its key's, or the configured tenant's.
PRINCIPAL = "lamina.principal"
#: Whether /health may tell what is behind it (an admin key, or no keys configured).
HEALTH_DETAIL = "lamina.health_detail"
#: The body's JSON value, read once (None without a POST body): the A2A adapter uses it.
PARSED_JSON = "lamina.json"
#: The request's route group and its headers, worked out once for every middleware.
ROUTE_GROUP = "lamina.route_group"
HEADERS = "lamina.headers"

PUBLIC = {"/health", "/.well-known/agent-card.json"}
# The A2A groups: refusals in their protocol, bodies must be JSON.
A2A_GROUPS = ("jsonrpc", "rest", "legacy")


def route_group(path: str, method: str) -> str:
    if path == "/.well-known/agent-card.json":
        return "card"
    if path in ("/health", "/metrics"):
        return path[1:]
    if path == "/tasks/send" or (path.startswith("/tasks/") and path.endswith("/get")):
        return "legacy"
    if path == "/" and method == "POST":
        return "jsonrpc"
    if path == "/mcp" or path.startswith("/mcp/"):
        return "mcp"
    if path == "/ui" or path.startswith("/ui/"):
        return "ui"
    return "rest"


def group_of(scope: Scope) -> str:
    """The request's route group (worked out on the first call, kept in the scope)."""
    group = scope.get(ROUTE_GROUP)
    if group is None:
        group = scope[ROUTE_GROUP] = route_group(scope["path"], scope["method"])
    return str(group)


def is_public(scope: Scope) -> bool:
    """The health check and the agent card, read with GET or HEAD: open to anyone."""
    return scope["path"] in PUBLIC and scope["method"] in ("GET", "HEAD")


def is_checked(scope: Scope) -> bool:
    """Whether the gate's checks apply to a request: every HTTP request but the public reads
    and the web inspector's (it signs people in with a session cookie and checks its own
    forms: CSRF, Origin, body size, rate limits; lamina.server.ui.base)."""
    return scope["type"] == "http" and not is_public(scope) and group_of(scope) != "ui"


def headers_of(scope: Scope) -> dict[str, str]:
    """The request's headers, names in lower case (the last of a repeated one wins); read on
    the first call, kept in the scope."""
    headers = scope.get(HEADERS)
    if headers is None:
        headers = scope[HEADERS] = {
            k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]
        }
    found: dict[str, str] = headers
    return found
