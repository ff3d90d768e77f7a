"""What the server tests share: an httpx client on the module's running server (``live``)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.server.harness import Running


@pytest.fixture
def client(live: Running) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=30) as c:
        yield c
