"""A client declaring an A2A version newer than 1.0 is logged as a warning; its request goes
on (the A2A adapter answers a newer major version itself)."""

from __future__ import annotations

import logging

import pytest
from starlette.middleware import Middleware

from lamina.server.middleware import VersionWarning
from lamina.server.middleware.version import declared_version
from tests.server.middleware.support import call, seen, stack

WARNED = stack(Middleware(VersionWarning))


@pytest.mark.parametrize("version", ["1.1", "2", "2.0.3"])
def test_a_newer_version_is_logged(version: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="lamina.server"):
        seen(call(WARNED, "POST", "/", json={}, headers={"A2A-Version": version}))
    assert caplog.messages == [
        f"client declares A2A version {version}, newer than the supported 1.0 (POST /)"
    ]


@pytest.mark.parametrize("version", ["1.0", "0.3", "1", "one"])
def test_a_supported_or_unreadable_version_is_not(
    version: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="lamina.server"):
        seen(call(WARNED, "POST", "/", json={}, headers={"A2A-Version": version}))
    assert caplog.messages == []


def test_public_reads_are_not_looked_at(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="lamina.server"):
        seen(call(WARNED, "GET", "/health", headers={"A2A-Version": "9.0"}))
    assert caplog.messages == []


def test_declared_versions_read_as_major_minor() -> None:
    assert declared_version(" 2 ") == (2, 0)
    assert declared_version("1.2.9") == (1, 2)
    assert declared_version("v1") is None
