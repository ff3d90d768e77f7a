"""Chat models through the official SDKs against fake servers, and ContextAwareModel."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lamina import AsyncLamina, ErrorCode, LaminaError
from lamina.config import LLMSettings
from lamina.context.aware_model import ContextAwareModel
from lamina.context.providers import (
    RuntimeContextAdapter,
    ToolDescriptor,
    ToolRegistryAdapter,
    session_scope,
)
from lamina.llm import ChatModel, build_chat_model, request
from tests.conftest import fast_settings
from tests.fakes.openai_server import Failure, FakeOpenAI

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow

PROVIDERS = ["openai", "anthropic"]


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def make_model(
    provider: str, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, **options: Any
) -> ChatModel:
    monkeypatch.setenv("FAKE_KEY", "sk-test")
    settings = LLMSettings(
        provider=provider,  # type: ignore[arg-type]
        model="fake-model",
        base_url=server.base_url if provider == "openai" else server.root_url,
        api_key_env="FAKE_KEY",
        **options,
    )
    return build_chat_model(settings)


def last_system(server: FakeOpenAI) -> str:
    body = server.chat_requests[-1]
    if "system" in body:  # Anthropic
        return str(body["system"])
    system = [m["content"] for m in body["messages"] if m["role"] == "system"]
    return system[0] if system else ""


async def generate(model: ChatModel, *messages: tuple[str, str], system: str = "") -> str:
    try:
        reply = await model.generate(request(*messages, system=system))  # type: ignore[arg-type]
        return reply.content
    finally:
        await model.aclose()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_call_goes_through_the_real_client(
    provider: str, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = make_model(provider, server, monkeypatch, max_tokens=77, temperature=0.2)
    text = asyncio.run(
        generate(
            model, ("user", "hello"), ("assistant", "hi"), ("user", "again"), system="Be kind."
        )
    )
    assert text == "echo: again"
    body = server.chat_requests[-1]
    assert body["model"] == "fake-model" and body["max_tokens"] == 77
    # Anthropic's SDK 2.x Messages API has no sampling parameters.
    assert body.get("temperature") == (0.2 if provider == "openai" else None)
    assert last_system(server) == "Be kind."
    assert [m["role"] for m in body["messages"] if m["role"] != "system"] == [
        "user",
        "assistant",
        "user",
    ]
    header = server.auth_headers[-1]
    if provider == "openai":
        assert header == "Bearer sk-test"


FAILURES = [
    (Failure(401), ErrorCode.UNAUTHORIZED, False),
    (Failure(403), ErrorCode.UNAUTHORIZED, False),
    (
        Failure(400, body='{"error": {"message": "context too long"}}'),
        ErrorCode.PROVIDER_ERROR,
        False,
    ),
    (Failure(429, headers={"retry-after": "7"}), ErrorCode.RATE_LIMITED, True),
    (Failure(503), ErrorCode.PROVIDER_ERROR, True),
    (Failure(200, body='{"choices": []}'), ErrorCode.PROVIDER_ERROR, False),
    (Failure(200, body='{"content": "not a list"}'), ErrorCode.PROVIDER_ERROR, False),
    (Failure(200, body="this is not json"), ErrorCode.PROVIDER_ERROR, False),
]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(("failure", "code", "retryable"), FAILURES)
def test_failures_map_to_error_codes(
    provider: str,
    failure: Failure,
    code: ErrorCode,
    retryable: bool,
    server: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = make_model(provider, server, monkeypatch, max_retries=0)
    server.fail_next(failure)
    with pytest.raises(LaminaError) as err:
        asyncio.run(generate(model, ("user", "hi")))
    assert err.value.code is code, err.value
    assert err.value.retryable is retryable
    if code is ErrorCode.RATE_LIMITED:
        assert err.value.retry_after == 7.0


@pytest.mark.parametrize("provider", PROVIDERS)
def test_transient_errors_are_retried_and_timeouts_reported(
    provider: str, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = make_model(provider, server, monkeypatch, max_retries=2)
    server.fail_next(Failure(500), Failure(502))
    assert asyncio.run(generate(model, ("user", "third time"))) == "echo: third time"
    assert len(server.chat_requests) == 3
    slow = make_model(provider, server, monkeypatch, max_retries=0, timeout_seconds=0.3)
    server.fail_next(Failure(200, delay=1.5))
    with pytest.raises(LaminaError) as err:
        asyncio.run(generate(slow, ("user", "hi")))
    assert err.value.code is ErrorCode.PROVIDER_ERROR and err.value.retryable
    assert "timed out" in err.value.message


def test_configuration_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    for settings in (
        LLMSettings(model=None),
        LLMSettings(model="gpt"),  # no key, no local base_url
        LLMSettings(provider="anthropic", model="claude"),
    ):
        with pytest.raises(LaminaError) as err:
            build_chat_model(settings)
        assert err.value.code is ErrorCode.CONFIGURATION_ERROR


# -- ContextAwareModel ----------------------------------------------------------------------


class Conversation:
    """Observations and reflections per session (what observational memory will provide)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def recent_observations(
        self, session_key: str, limit: int, *, tenant_id: str | None = None
    ) -> list[str]:
        self.asked.append(session_key)
        return [f"{session_key}: the user asked about replication lag"]

    async def recent_reflections(
        self, session_key: str, limit: int, *, tenant_id: str | None = None
    ) -> list[str]:
        return [f"{session_key}: long-running PostgreSQL migration project"]


async def _setup(data_dir: Path) -> tuple[AsyncLamina, RuntimeContextAdapter, Conversation]:
    ms = AsyncLamina(fast_settings(data_dir))
    await ms.start()
    await ms.context.knowledge.save("db", "The production database is PostgreSQL 16")
    await ms.context.learnings.save("replication lag alert", "check the WAL sender slots")
    await ms.memory.add(
        "User manages the PostgreSQL replication cluster", layer="user", user_id="u1"
    )
    runtime = RuntimeContextAdapter(active_tool_count=2)
    ms.context.runtime_context = runtime
    ms.context.tool_registry = ToolRegistryAdapter(
        [ToolDescriptor("pg_stat", "Show PostgreSQL replication statistics")]
    )
    conversation = Conversation()
    ms.context.conversation_memory = conversation
    return ms, runtime, conversation


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_context_aware_model_augments_every_call(
    provider: str, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, data_dir: Path
) -> None:
    async def scenario() -> None:
        ms, runtime, conversation = await _setup(data_dir)
        model = ContextAwareModel(
            make_model(provider, server, monkeypatch), ms.context, runtime=runtime
        )
        try:
            with session_scope("telegram:42:7", user_id="u1"):
                reply = await model.generate(
                    request(
                        ("user", "old question"),
                        ("assistant", "old answer"),
                        ("user", "why is PostgreSQL replication lag alert firing?"),
                        system="You are the on-call assistant.",
                    )
                )
            assert reply.content.startswith("echo: why is PostgreSQL")
            system = last_system(server)
            assert system.startswith("You are the on-call assistant.\n\n## Runtime Context")
            assert "Session: telegram:42:7 | Channel: telegram | Tools: 2" in system
            assert "- **pg_stat**: Show PostgreSQL replication statistics" in system
            assert "- [fact] db: The production database is PostgreSQL 16" in system
            assert "When 'replication lag alert' occurs: check the WAL sender slots" in system
            assert (
                "## Relevant Memories\n- User manages the PostgreSQL replication cluster" in system
            )
            memory = system.split("## Conversation Memory", 1)[1]
            assert memory.index("migration project") < memory.index("replication lag")
            assert conversation.asked == ["telegram:42:7"]
            # The caller's messages are forwarded untouched.
            body = server.chat_requests[-1]
            users = [m["content"] for m in body["messages"] if m["role"] == "user"]
            assert users == ["old question", "why is PostgreSQL replication lag alert firing?"]

            # Without a session: no memory of any kind, the rest still there.
            await model.generate(request(("user", "PostgreSQL replication lag"), system="S."))
            system = last_system(server)
            assert "## User Knowledge" in system and "Channel: direct" in system
            assert "Conversation Memory" not in system and "Relevant Memories" not in system
            assert conversation.asked == ["telegram:42:7"]

            # No keywords anywhere and no session: only what does not depend on the query
            # (the runtime context); no tools, no knowledge.
            await model.generate(request(("user", "?!"), system="Plain."))
            system = last_system(server)
            assert system.startswith("Plain.\n\n## Runtime Context\n- Session: none")
            assert "## User Knowledge" not in system and "## Available Tools" not in system

            # A follow-up without keywords in a session: the session memory and runtime
            # context always; the searchable layers from the last message with keywords.
            with session_scope("telegram:42:7", user_id="u1"):
                await model.generate(
                    request(
                        ("user", "is the replication lag alert firing?"),
                        ("assistant", "yes"),
                        ("user", "why?"),
                        system="S.",
                    )
                )
            system = last_system(server)
            assert "## Conversation Memory" in system and "Session: telegram:42:7" in system
            assert "When 'replication lag alert' occurs" in system
        finally:
            await model.aclose()
            await ms.close()

    asyncio.run(scenario())


def test_concurrent_calls_each_see_their_own_session(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, data_dir: Path
) -> None:
    async def scenario() -> None:
        ms, runtime, _ = await _setup(data_dir)
        model = ContextAwareModel(
            make_model("openai", server, monkeypatch), ms.context, runtime=runtime
        )

        async def call(session: str) -> None:
            with session_scope(session, user_id="u1"):
                await model.generate(request(("user", f"replication lag in {session}")))

        try:
            sessions = [f"slack:team:{n}" for n in range(8)]
            await asyncio.gather(*(call(s) for s in sessions))
        finally:
            await model.aclose()
            await ms.close()
        for body in server.chat_requests:
            system = body["messages"][0]["content"]
            question = body["messages"][-1]["content"]
            session = question.rsplit(" ", 1)[1]
            assert f"Session: {session} |" in system
            assert f"{session}: the user asked about replication lag" in system
            others = [s for s in sessions if s != session]
            assert not any(f"{o}:" in system for o in others)

    asyncio.run(scenario())


def test_retrieval_trouble_never_fails_the_call(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, data_dir: Path
) -> None:
    class Broken:
        async def recent_observations(
            self, session_key: str, limit: int, *, tenant_id: str | None = None
        ) -> list[str]:
            raise RuntimeError("observation store down")

        async def recent_reflections(
            self, session_key: str, limit: int, *, tenant_id: str | None = None
        ) -> list[str]:
            raise LaminaError(ErrorCode.PROVIDER_ERROR, "reflections unavailable")

    async def scenario() -> None:
        ms, _, _ = await _setup(data_dir)
        ms.context.conversation_memory = Broken()
        model = ContextAwareModel(make_model("openai", server, monkeypatch), ms.context)
        try:
            with session_scope("s1"):
                reply = await model.generate(request(("user", "PostgreSQL replication")))
            assert reply.content == "echo: PostgreSQL replication"
            assert "## User Knowledge" in last_system(server)
            huge = (
                "PostgreSQL replication " * 1000
            )  # longer than max_query_length: cut, not refused
            await model.generate(request(("user", huge)))
            assert "## User Knowledge" in last_system(server)
        finally:
            await model.aclose()
            await ms.close()

    asyncio.run(scenario())
