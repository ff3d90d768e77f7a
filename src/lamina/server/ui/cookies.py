"""The inspector's session: a signed cookie (HMAC-SHA256 with the server's secret) holding
the hash of the API key that signed in, a CSRF token and an expiry. Nothing is stored on the
server, so replicas sharing ``server.ui_secret`` share sessions; a key removed from the
configuration ends its sessions at the next request (the hash no longer resolves)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

COOKIE = "lamina_ui"
#: The form field every state-changing request carries.
CSRF_FIELD = "csrf"


@dataclass(frozen=True)
class UiSession:
    """``key_hash``: the API key signed in with (None: not signed in, or no keys configured);
    ``csrf``: the token the session's forms carry; ``expires``: Unix time."""

    key_hash: str | None
    csrf: str
    expires: int


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SessionCodec:
    """Signs sessions into cookie values and reads them back (None when the signature, the
    shape or the expiry is wrong: a forged or stale cookie is no session)."""

    def __init__(self, secret: str | None, ttl: float) -> None:
        raw = secret.encode("utf-8") if secret else secrets.token_bytes(32)
        # A key of its own for cookies, derived from the configured secret.
        self._key = hmac.new(raw, b"lamina-ui-session", hashlib.sha256).digest()
        self.ttl = ttl

    def new(self, key_hash: str | None) -> UiSession:
        return UiSession(key_hash, secrets.token_urlsafe(24), int(time.time() + self.ttl))

    def _sign(self, payload: str) -> str:
        return _b64(hmac.new(self._key, payload.encode("ascii"), hashlib.sha256).digest())

    def dump(self, session: UiSession) -> str:
        body = {"k": session.key_hash, "c": session.csrf, "e": session.expires}
        payload = _b64(json.dumps(body, separators=(",", ":")).encode("utf-8"))
        return f"{payload}.{self._sign(payload)}"

    def load(self, value: str | None) -> UiSession | None:
        if not value or len(value) > 1024 or value.count(".") != 1:
            return None
        payload, signature = value.split(".")
        try:
            expected = self._sign(payload)
        except UnicodeEncodeError:
            return None
        if not hmac.compare_digest(expected, signature):
            return None
        try:
            body = json.loads(_unb64(payload))
        except (ValueError, UnicodeDecodeError):
            return None
        if not isinstance(body, dict):
            return None
        key_hash, csrf, expires = body.get("k"), body.get("c"), body.get("e")
        if not (key_hash is None or isinstance(key_hash, str)) or not isinstance(csrf, str):
            return None
        if not isinstance(expires, int) or expires < time.time():
            return None
        return UiSession(key_hash, csrf, expires)


def csrf_matches(session: UiSession | None, presented: str | None) -> bool:
    """Whether a form's token is its session's (compared in constant time)."""
    if session is None or not presented:
        return False
    return hmac.compare_digest(session.csrf.encode(), presented.encode("utf-8", "replace"))


def same_origin(origin: str | None, referer: str | None, host: str | None) -> bool:
    """Whether a state-changing request comes from a page of this server: its Origin (or,
    when a browser sent none, its Referer) names the Host it was sent to. Neither: refused,
    since every browser sends Origin with a form post."""
    if not host:
        return False
    source = origin if origin and origin != "null" else referer
    if not source:
        return False
    return urlsplit(source).netloc.lower() == host.lower()
