"""A chat model's calls have one retry layer, lamina's (llm.max_retries, jittered backoff;
the SDK client's own retries are off): an unreachable model fails within seconds by
default, directly and through add(..., infer=True), and the configured count of retries is
what reaches a real socket."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lamina import ErrorCode, Lamina, LaminaError
from lamina.config import LLMSettings, load_settings
from lamina.llm import build_chat_model, request
from lamina.retry import RetryPolicy
from tests.conftest import fast_settings

PROVIDERS = ["openai", "anthropic"]


@pytest.fixture
def closed_port() -> int:
    """A port of 127.0.0.1 nothing listens on: a connection is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class Hangup:
    """A listening socket that accepts each connection and closes it unanswered, counting
    the connections."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.connections = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept up
        self.listener.close()
        self._thread.join(5)


class Blackhole:
    """A host that never completes a connection: a listening socket that accepts nothing,
    its accept queue filled, so the kernel drops every further connection attempt (as a
    firewall dropping packets, or a machine that is down, would)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=0)
        self.port: int = self.listener.getsockname()[1]
        self._fill: list[socket.socket] = []
        for _ in range(4):
            conn = socket.socket()
            conn.setblocking(False)
            conn.connect_ex(("127.0.0.1", self.port))
            self._fill.append(conn)
        time.sleep(0.1)

    def hangs(self) -> bool:
        """Whether a new connection attempt hangs (the trick works on this kernel)."""
        with socket.socket() as probe:
            probe.settimeout(0.3)
            try:
                probe.connect(("127.0.0.1", self.port))
            except TimeoutError:
                return True
            return False

    def close(self) -> None:
        for conn in self._fill:
            conn.close()
        self.listener.close()


@pytest.fixture
def blackhole() -> Iterator[Blackhole]:
    host = Blackhole()
    yield host
    host.close()


@pytest.fixture
def hangup() -> Iterator[Hangup]:
    server = Hangup()
    yield server
    server.close()


def url(provider: str, port: int) -> str:
    return f"http://127.0.0.1:{port}" + ("/v1" if provider == "openai" else "")


def fail(settings: LLMSettings) -> tuple[LaminaError, float]:
    """The error of one call of the model the settings build, and its wall time."""
    model = build_chat_model(settings)

    async def call() -> None:
        try:
            await model.generate(request(("user", "hello")))
        finally:
            await model.aclose()  # type: ignore[attr-defined]

    started = time.monotonic()
    with pytest.raises(LaminaError) as err:
        asyncio.run(call())
    return err.value, time.monotonic() - started


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_unreachable_chat_model_fails_within_five_seconds_by_default(
    provider: str, closed_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    settings = LLMSettings(provider=provider, model="m", base_url=url(provider, closed_port))  # type: ignore[arg-type]
    assert (settings.max_retries, settings.retry_initial_delay) == (2, 0.5)  # the defaults
    error, took = fail(settings)
    assert error.code is ErrorCode.PROVIDER_ERROR and error.retryable
    assert "cannot connect" in error.message
    assert took < 5.0, took


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_host_that_never_connects_fails_within_five_seconds_by_default(
    provider: str, blackhole: Blackhole, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connecting has its own bound (llm.connect_timeout_seconds, 1 s) inside the attempt's
    llm.timeout_seconds (60 s): three attempts that never connect, and the waits between
    them, stay within 5 s."""
    assert blackhole.hangs()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    settings = LLMSettings(provider=provider, model="m", base_url=url(provider, blackhole.port))  # type: ignore[arg-type]
    assert (settings.connect_timeout_seconds, settings.timeout_seconds) == (1.0, 60.0)
    error, took = fail(settings)
    assert error.code is ErrorCode.PROVIDER_ERROR and error.retryable
    assert 3.0 <= took < 5.0, took  # three 1 s connection attempts and two waits


def test_add_with_infer_and_an_unreachable_model_fails_within_five_seconds(
    data_dir: Path, closed_port: int
) -> None:
    """Every setting at its default (retry.* too) but the model's address: consolidation
    does not retry the model's failed call a second time over."""
    settings = load_settings(
        data_dir=data_dir, llm={"model": "m", "base_url": url("openai", closed_port)}
    )
    with Lamina(settings) as ms:
        started = time.monotonic()
        with pytest.raises(LaminaError) as err:
            ms.memory.add("I moved to Lisbon.", layer="user", user_id="alice", infer=True)
        took = time.monotonic() - started
        assert err.value.code is ErrorCode.PROVIDER_ERROR and err.value.retryable
        assert took < 5.0, took
        assert ms.memory.list(user_id="alice").total_count == 0  # nothing stored


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("retries", [0, 3])
def test_the_configured_retries_are_the_connections_made(
    provider: str, retries: int, hangup: Hangup, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    settings = LLMSettings(
        provider=provider,  # type: ignore[arg-type]
        model="m",
        base_url=url(provider, hangup.port),
        max_retries=retries,
        retry_initial_delay=0.01,
    )
    error, _ = fail(settings)
    assert error.code is ErrorCode.PROVIDER_ERROR and error.retryable
    assert hangup.connections == 1 + retries  # lamina's retries only, none of the SDK's


def test_consolidation_makes_the_configured_attempts_once(data_dir: Path, hangup: Hangup) -> None:
    """add(..., infer=True): 1 + llm.max_retries connections, not that many again for each
    of the shared policy's retries (retry.max_retries, 3 here)."""
    settings = fast_settings(
        data_dir,
        llm={"model": "m", "base_url": url("openai", hangup.port), "max_retries": 2},
    )
    with Lamina(settings) as ms:
        with pytest.raises(LaminaError) as err:
            ms.memory.add("I moved to Lisbon.", layer="user", user_id="alice", infer=True)
        assert err.value.code is ErrorCode.PROVIDER_ERROR and err.value.retryable
        assert hangup.connections == 3
        assert ms.memory.list(user_id="alice").total_count == 0


def test_the_waits_are_jittered_and_bounded() -> None:
    policy = LLMSettings(retry_initial_delay=1.0, retry_max_delay=3.0).retry_policy()
    transient = LaminaError(ErrorCode.PROVIDER_ERROR, "x")
    waits = [[policy.delay(n, transient) for _ in range(200)] for n in (1, 2, 3)]
    for n, (low, high) in enumerate([(0.5, 1.0), (1.0, 2.0), (1.5, 3.0)]):
        assert all(low <= w <= high for w in waits[n]), n
        assert len(set(waits[n])) > 100  # random, not one fixed wait
    # Without jitter (retry.*: the store's policy) the waits are exact, as before.
    assert RetryPolicy(initial_delay=1.0).delay(2, transient) == 2.0
    limited = LaminaError(ErrorCode.RATE_LIMITED, "x", retry_after=2.5)
    assert policy.delay(1, limited) == 2.5  # the provider's Retry-After, not jittered
