"""API keys: only SHA-256 hashes are configured; a key maps to a tenant and a tier.

Keys are 32 random bytes (``lamina keys new``), so a fast hash is enough: nobody can
guess one from its hash, and lookups cost microseconds on every request.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from lamina.config import ApiKey, Settings

KEY_PREFIX = "ms_"


@dataclass(frozen=True)
class Principal:
    tenant: str
    tier: str
    name: str = ""


def hash_key(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


class KeyRing:
    def __init__(self, keys: Iterable[ApiKey]) -> None:
        self._by_hash = {k.key_hash: k for k in keys}

    @property
    def enabled(self) -> bool:
        return bool(self._by_hash)

    def resolve(self, key: str | None) -> Principal | None:
        """The principal of ``key``, or None when it is not a configured key."""
        if not key or len(key) > 512:
            return None
        digest = hash_key(key)
        found = self._by_hash.get(digest)
        if found is None or not hmac.compare_digest(found.key_hash, digest):
            return None
        return Principal(found.tenant_id, found.tier, found.name)

    def resolve_hash(self, key_hash: str) -> Principal | None:
        """The principal of the configured key with this hash (the web inspector's session
        keeps the hash, so a key removed from the configuration ends its sessions too)."""
        found = self._by_hash.get(key_hash)
        if found is None or not hmac.compare_digest(found.key_hash, key_hash):
            return None
        return Principal(found.tenant_id, found.tier, found.name)


def tenants_served(settings: Settings) -> str:
    """Whom a server acts for, as its banner says: without API keys every request acts for
    the configured tenant; with keys, each key for its own tenant (``tenant_id`` serves none
    of them then)."""
    keys = settings.server.api_keys
    if not keys:
        return f"tenant {settings.tenant_id} (no API keys)"
    named = sorted({key.tenant_id for key in keys})
    return f"tenants from API keys: {', '.join(named)}"


def presented_key(authorization: str | None, api_key: str | None) -> str | None:
    """The key of ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``."""
    if api_key:
        return api_key.strip()
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    return None
