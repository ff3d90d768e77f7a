"""What the inspector's tests share: two tenants' keys and an admin's, a server with them,
and signing in through the form as a browser does (cookie, CSRF token, Origin)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from lamina.config import Settings
from lamina.server.auth import hash_key, new_key
from tests.server.harness import server_settings

KEY_ACME, KEY_GLOBEX, KEY_ADMIN = new_key(), new_key(), new_key()


def ui_settings(data_dir: Path, **server: Any) -> Settings:
    keys = [
        {"key_hash": hash_key(KEY_ACME), "tenant_id": "acme", "name": "ann"},
        {"key_hash": hash_key(KEY_GLOBEX), "tenant_id": "globex", "name": "gus"},
        {"key_hash": hash_key(KEY_ADMIN), "tenant_id": "ops", "tier": "admin", "name": "ops"},
    ]
    tiers = {name: {"requests_per_minute": 100_000} for name in ("default", "admin")}
    return server_settings(data_dir, api_keys=keys, tiers=tiers, **server)


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None, page[:2000]
    return found.group(1)


@contextmanager
def sign_in(url: str, key: str) -> Iterator[httpx.Client]:
    """A client signed in with ``key`` through the sign-in form."""
    with httpx.Client(base_url=url, timeout=30, headers={"origin": url}) as client:
        yield _signed_in(client, key)


def _signed_in(client: httpx.Client, key: str) -> httpx.Client:
    form = client.get("/ui/login")
    assert form.status_code == 200, form.text
    done = client.post("/ui/login", data={"key": key, "csrf": csrf_of(form.text), "next": ""})
    assert done.status_code == 303, done.text
    return client


def memory_ids(page: str) -> list[str]:
    """The memories a list page links to, in order."""
    return re.findall(r'href="/ui/memories/([0-9a-f-]{36})"', page)


#: An accepted company policy's rule: the dependency ``requests`` is blocked.
NO_REQUESTS = {
    "id": "no-requests",
    "target": "dependency",
    "operator": "must_not_use",
    "value": "requests",
    "severity": "block",
}
