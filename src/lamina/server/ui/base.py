"""What every inspector page shares: who is asking (the signed session cookie, resolved to
a tenant exactly as an API key is), the CSRF and Origin checks of state-changing requests,
rate limits, the templates (autoescaped), error pages and the security headers."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from lamina.errors import ErrorCode, LaminaError
from lamina.runtime import AsyncLamina
from lamina.server.auth import KeyRing, Principal
from lamina.server.ratelimit import RateLimiter
from lamina.server.ui.cookies import (
    COOKIE,
    CSRF_FIELD,
    SessionCodec,
    UiSession,
    csrf_matches,
    same_origin,
)
from lamina.server.ui.forms import Params
from lamina.threads.service import ThreadService

log = logging.getLogger("lamina.server.ui")

HERE = Path(__file__).resolve().parent
#: The path the inspector is mounted at.
PREFIX = "/ui"
#: The rate-limit skill the inspector's requests count against.
SKILL = "ui"

#: No script runs on these pages, and styles come from the one stylesheet.
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
    "permissions-policy": "camera=(), microphone=(), geolocation=()",
}

#: The HTTP status of each error a page can show.
STATUS = {
    ErrorCode.MEMORY_NOT_FOUND: 404,
    ErrorCode.ITEM_NOT_FOUND: 404,
    ErrorCode.UNAUTHORIZED: 403,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.CONFLICT: 409,
    ErrorCode.PAYLOAD_TOO_LARGE: 413,
    ErrorCode.INTERNAL_ERROR: 500,
    ErrorCode.PROVIDER_ERROR: 502,
    ErrorCode.EMBEDDING_FAILED: 502,
    ErrorCode.REPOSITORY_ERROR: 500,
    ErrorCode.CONFIGURATION_ERROR: 500,
}


@dataclass(frozen=True)
class Viewer:
    """The person behind a request: their tenant and tier, the session their forms carry,
    and what they sent (the query string, or the form body of a POST)."""

    principal: Principal
    session: UiSession
    params: Params
    #: Signed in with a key (False: no keys are configured, nobody signs in).
    signed_in: bool

    @property
    def tenant(self) -> str:
        return self.principal.tenant

    @property
    def admin(self) -> bool:
        return self.principal.tier == "admin"

    @property
    def actor(self) -> str:
        """Who the history records as the author of a change made here."""
        return f"ui:{self.principal.name or self.principal.tenant}"[:128]


Handler = Callable[["Inspector", Request, Viewer], Awaitable[Response]]


class Background(Protocol):
    """Work a page needs done while the server runs (the server page's sampler)."""

    def start(self) -> None: ...

    async def stop(self) -> None: ...


def _when(value: datetime | None) -> str:
    return "—" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


class Inspector:
    """The inspector's state, built once per server."""

    def __init__(
        self,
        ms: AsyncLamina,
        keys: KeyRing,
        limiter: RateLimiter,
        *,
        max_body: int,
        threads: ThreadService,
    ) -> None:
        """``threads``: the server's thread service (live threads, the tenant's tasks)."""
        self.ms = ms
        self.keys = keys
        self.limiter = limiter
        self.max_body = max_body
        self.threads = threads
        settings = ms.settings.server
        self.codec = SessionCodec(settings.ui_secret, settings.ui_session_ttl)
        self.default = Principal(ms.settings.tenant_id, "admin" if not keys.enabled else "default")
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.background: list[Background] = []
        self.env.filters["when"] = _when
        self.env.globals["prefix"] = PREFIX
        self.env.globals["csrf_field"] = CSRF_FIELD

    def start(self) -> None:
        for work in self.background:
            work.start()

    async def stop(self) -> None:
        for work in self.background:
            await work.stop()

    # -- rendering --------------------------------------------------------------------------

    def render(
        self, viewer: Viewer | None, template: str, status: int = 200, **context: Any
    ) -> HTMLResponse:
        page = self.env.get_template(template).render(viewer=viewer, **context)
        return HTMLResponse(page, status_code=status)

    def error(self, viewer: Viewer | None, exc: LaminaError) -> HTMLResponse:
        status = STATUS.get(exc.code, 400)
        return self.render(
            viewer,
            "error.html",
            status,
            code=exc.code.value,
            message=exc.message,
            http_status=status,
        )

    # -- who is asking ----------------------------------------------------------------------

    def principal(self, session: UiSession | None) -> Principal | None:
        if not self.keys.enabled:
            return self.default
        if session is None or session.key_hash is None:
            return None
        return self.keys.resolve_hash(session.key_hash)

    def set_cookie(self, request: Request, response: Response, session: UiSession) -> None:
        response.set_cookie(
            COOKIE,
            self.codec.dump(session),
            max_age=int(self.codec.ttl),
            path=PREFIX,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )

    async def read_params(self, request: Request) -> Params:
        """The query string, or a form body (urlencoded, at most max_body bytes)."""
        if request.method != "POST":
            return Params.parse(request.url.query)
        media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media != "application/x-www-form-urlencoded":
            raise LaminaError(
                ErrorCode.INVALID_ARGUMENT,
                "the inspector's forms post application/x-www-form-urlencoded",
            )
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > self.max_body:
                raise LaminaError(
                    ErrorCode.PAYLOAD_TOO_LARGE,
                    f"the form is over the limit of {self.max_body} bytes",
                )
        return Params.parse(body.decode("utf-8", "replace"))

    def route(
        self, path: str, handler: Handler, *, post: bool = False, public: bool = False
    ) -> Route:
        """A page at ``PREFIX + path``: signed in (else to the sign-in form), rate limited;
        a POST also needs this server's Origin and the session's CSRF token."""

        async def endpoint(request: Request) -> Response:
            response = await self._serve(request, handler, public)
            response.headers.update(SECURITY_HEADERS)
            return response

        return Route(PREFIX + path, endpoint, methods=["POST"] if post else ["GET", "HEAD"])

    async def _serve(self, request: Request, handler: Handler, public: bool) -> Response:
        post = request.method == "POST"
        found = self.codec.load(request.cookies.get(COOKIE))
        # A new session cookie only ever comes with a page (a GET): a refused cross-site
        # post must not replace the session of the person it was aimed at.
        session = found or self.codec.new(None)
        principal = self.principal(found)
        anonymous = Viewer(Principal("", "default"), session, Params({}), signed_in=False)
        if post and not same_origin(
            request.headers.get("origin"),
            request.headers.get("referer"),
            request.headers.get("host"),
        ):
            message = "this form was not sent from a page of this server (Origin check)"
            return self.error(anonymous, LaminaError(ErrorCode.UNAUTHORIZED, message))
        if principal is None and not public:
            query = f"?{request.url.query}" if request.url.query else ""
            response: Response = RedirectResponse(
                f"{PREFIX}/login?next={quote(request.url.path + query)}", 303
            )
            if found is None and not post:
                self.set_cookie(request, response, session)
            return response
        viewer = Viewer(
            principal or anonymous.principal,
            session,
            Params({}),
            signed_in=self.keys.enabled and principal is not None,
        )
        try:
            params = await self.read_params(request)
            if post and not csrf_matches(found, params.get(CSRF_FIELD)):
                raise LaminaError(
                    ErrorCode.UNAUTHORIZED,
                    "the form's CSRF token does not match this session: reload the page and "
                    "send it again",
                )
            viewer = Viewer(viewer.principal, session, params, viewer.signed_in)
            if principal is not None:
                limited = await self.limiter.check(principal.tenant, principal.tier, SKILL)
                if limited is not None:
                    raise LaminaError(
                        ErrorCode.RATE_LIMITED,
                        f"rate limit reached: retry in {int(limited.retry_after)} s",
                    )
            response = await handler(self, request, viewer)
        except LaminaError as exc:
            if exc.code is ErrorCode.INTERNAL_ERROR:
                log.error("inspector %s %s: %s", request.method, request.url.path, exc)
            response = self.error(viewer, exc)
        if found is None and not post:
            self.set_cookie(request, response, session)
        return response


def redirect(path: str) -> RedirectResponse:
    """After a POST: see the result with a GET (303)."""
    return RedirectResponse(PREFIX + path, 303)
