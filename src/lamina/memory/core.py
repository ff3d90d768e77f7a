"""What every service call shares, whatever its domain: the tenant it acts for (the one
given, else the default; checked) and the start-up it waits for (the store opened and
migrated). memory, knowledge, context and observational memory build their services on it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from lamina.checks import check_tenant


class ServiceCore:
    """The default tenant and the start-up hook of a service."""

    def __init__(self, *, default_tenant: str, ready: Callable[[], Awaitable[None]]) -> None:
        self._default_tenant = default_tenant
        self._ready = ready

    def _tenant(self, tenant_id: str | None) -> str:
        return check_tenant(self._default_tenant if tenant_id is None else tenant_id)
