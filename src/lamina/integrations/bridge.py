"""Run lamina's coroutines for a framework adapter, from sync or async code of any loop.

An AsyncLamina's store lives on the loop it was started on (its home); a ``Lamina`` facade
runs one on a loop of its own. Adapters are called by frameworks from threads and from other
event loops, so every call goes to the home loop: awaited directly when already there, sent
there (and awaited or waited for) otherwise.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from lamina.checks import MAX_METADATA_BYTES, too_long
from lamina.errors import ErrorCode, LaminaError
from lamina.facade import Lamina
from lamina.memory.layers import IDENTIFIER_NAMES
from lamina.runtime import AsyncLamina

R = TypeVar("R")


def check_identifier_names(names: Iterable[str]) -> None:
    """INVALID_ARGUMENT unless every one of ``names`` is an identifier's (user_id, ...)."""
    unknown = sorted(set(names) - set(IDENTIFIER_NAMES))
    if unknown:
        raise LaminaError(
            ErrorCode.INVALID_ARGUMENT,
            f"unknown identifier(s) {unknown}; valid: {', '.join(IDENTIFIER_NAMES)}",
        )


def check_kept(records: Iterable[Mapping[str, Any]], max_content_length: int) -> None:
    """CONTENT_TOO_LONG when what an adapter keeps beside a session message (its ``kept``
    tool call, as JSON) is longer than ``max_content_length`` + MAX_METADATA_BYTES
    characters: the message's content may be there (as parts) and its metadata."""
    limit = max_content_length + MAX_METADATA_BYTES
    for record in records:
        for call in record.get("tool_calls") or []:
            if call.get("kept"):
                size = len(json.dumps(call.get("input"), ensure_ascii=False))
                if size > limit:
                    raise too_long("a message's fields kept beside its text", size, limit)


class Bridge:
    """``lamina`` is a Lamina (blocking facade) or an AsyncLamina."""

    def __init__(self, lamina: Lamina | AsyncLamina, *, tenant_id: str | None = None) -> None:
        if isinstance(lamina, Lamina):
            self.ms: AsyncLamina = lamina.aio
            self._home: asyncio.AbstractEventLoop | None = lamina.loop
        elif isinstance(lamina, AsyncLamina):
            self.ms = lamina
            try:
                self._home = asyncio.get_running_loop()
            except RuntimeError:
                self._home = None
        else:
            raise LaminaError(
                ErrorCode.INVALID_ARGUMENT,
                f"expected a Lamina or an AsyncLamina, got {type(lamina).__name__}",
            )
        self.tenant_id = tenant_id

    async def call(self, coro: Coroutine[Any, Any, R]) -> R:
        """Await ``coro`` on the home loop, from any loop."""
        here = asyncio.get_running_loop()
        if self._home is None:
            self._home = here
        if self._home is here:
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._home))

    def run(self, coro: Coroutine[Any, Any, R]) -> R:
        """Wait for ``coro`` from blocking code (any thread but the home loop's)."""
        home = self._home
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        if home is None or current is home or not home.is_running():
            coro.close()
            raise LaminaError(
                ErrorCode.CONFIGURATION_ERROR,
                "a blocking call needs lamina running on another thread's event loop: use "
                "the async methods, or give the adapter a Lamina (the blocking facade)",
            )
        return asyncio.run_coroutine_threadsafe(coro, home).result()
