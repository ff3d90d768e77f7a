"""The context-aware model keeps a session's base system prompt (given once) on every later
turn until a new one replaces it, across a restart too; its runtime adapter alone adds the
Runtime Context section. Checked on what the fake server receives, through the real
OpenAI-compatible and Anthropic clients, streaming and not, with tool calls in between."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lamina import AsyncLamina, ContextLayer, ErrorCode, LaminaError
from lamina.config import LLMSettings, Settings
from lamina.context.aware_model import ContextAwareModel
from lamina.context.providers import RuntimeContextAdapter, session_scope
from lamina.llm import ChatMessage, ChatResponse, request
from lamina.llm.base import ChatRequest, ToolSpec
from tests.conftest import fast_settings
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.pg import require_postgres, reset_database

S = "slack:T1:C2"
ON_CALL = "You are the on-call assistant."
RELEASE = "You are the release bot."
REPLICA = ToolSpec(
    "replica_status",
    "The replication status of a cluster",
    {"type": "object", "properties": {"cluster": {"type": "string"}}, "required": ["cluster"]},
)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KEY", "sk-test")


def settings(data_dir: Path, server: FakeOpenAI, provider: str, **store: Any) -> Settings:
    llm = LLMSettings(
        provider=provider,  # type: ignore[arg-type]
        model="fake-model",
        base_url=server.base_url if provider == "openai" else server.root_url,
        api_key_env="FAKE_KEY",
        max_retries=0,
    )
    return fast_settings(data_dir, llm=llm.model_dump(), **store)


def system_sent(server: FakeOpenAI, n: int = -1) -> str:
    """The system instruction of the n-th chat request, as the provider's API carries it."""
    body = server.chat_requests[n]
    if "system" in body:  # Anthropic: apart from the messages
        return str(body["system"])
    first = body["messages"][0]
    return str(first["content"]) if first["role"] == "system" else ""


def roles_sent(server: FakeOpenAI, n: int = -1) -> list[str]:
    return [m["role"] for m in server.chat_requests[n]["messages"] if m["role"] != "system"]


def is_tool_result(body: dict[str, Any]) -> bool:
    last = body["messages"][-1]
    content = last["content"]
    return last["role"] == "tool" or (
        isinstance(content, list) and content[0].get("type") == "tool_result"
    )


def agent(body: dict[str, Any]) -> str | Reply:
    """Asks for the replica status when the user asks about replication, then answers."""
    if is_tool_result(body):
        return "The replica is 40 s behind."
    last = body["messages"][-1]["content"]
    if isinstance(last, str) and "replication" in last:
        return Reply(calls=[("replica_status", {"cluster": "staging"})])
    return f"ok: {last}"


async def turn(model: ContextAwareModel, req: ChatRequest, streaming: bool) -> ChatResponse:
    if not streaming:
        return await model.generate(req)
    chunks = [c async for c in model.stream(req)]
    assert chunks[-1].done and chunks[-1].response is not None
    return chunks[-1].response


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_base_system_prompt_is_kept_until_replaced(
    provider: str, streaming: bool, server: FakeOpenAI, data_dir: Path
) -> None:
    server.reply = agent

    async def scenario() -> None:
        async with AsyncLamina(settings(data_dir, server, provider)) as ms:
            runtime = RuntimeContextAdapter(active_tool_count=1)
            model = ms.context_model(runtime=runtime)
            with session_scope(S, user_id="alice"):
                # Turn 1: the base prompt, given once; the model calls a tool.
                question = request(
                    ("user", "why is replication lagging?"), system=ON_CALL, tools=(REPLICA,)
                )
                first = await turn(model, question, streaming)
                [call] = first.tool_calls
                assert system_sent(server).startswith(ON_CALL + "\n\n## Runtime Context")
                # The tool's result goes back without a system prompt: the base is kept.
                result = ChatMessage("tool", '{"lag_seconds": 40}', tool_call_id=call.id)
                answer = await turn(model, ChatRequest((result,), tools=(REPLICA,)), streaming)
                assert answer.content == "The replica is 40 s behind."
                assert system_sent(server).startswith(ON_CALL + "\n\n")

                # Turn 2: a follow-up with only the new message.
                await turn(model, request(("user", "why?")), streaming)
                system = system_sent(server)
                assert system.startswith(
                    ON_CALL + "\n\n## Runtime Context\n- Session: slack:T1:C2 | Channel: slack"
                    " | Tools: 1"
                )
                assert system.count(ON_CALL) == 1
                tool_turn = ["user", "assistant", "tool" if provider == "openai" else "user"]
                assert roles_sent(server) == [*tool_turn, "assistant", "user"]

                # Turn 3: a new system= replaces the base, from then on.
                await turn(model, request(("user", "and the deploy?"), system=RELEASE), streaming)
                assert system_sent(server).startswith(RELEASE + "\n\n## Runtime Context")
                assert ON_CALL not in system_sent(server)
                await turn(model, request(("user", "when?")), streaming)
                assert system_sent(server).startswith(RELEASE + "\n\n## Runtime Context")
                assert ON_CALL not in system_sent(server)
            assert await ms.sessions.system_prompt(S) == RELEASE

            # Cleared: the next turn has no base, only the context.
            await ms.sessions.set_system_prompt(S, None)
            with session_scope(S, user_id="alice"):
                await turn(model, request(("user", "and now?")), streaming)
            assert system_sent(server).startswith("## Runtime Context")
            assert RELEASE not in system_sent(server)
            # Another session never sees this one's base prompt.
            with session_scope("slack:T1:other"):
                await turn(model, request(("user", "hello")), streaming)
            assert system_sent(server).startswith("## Runtime Context\n- Session: slack:T1:other")
            await model.aclose()

    asyncio.run(scenario())


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_the_base_system_prompt_survives_a_restart(
    store: str, server: FakeOpenAI, data_dir: Path
) -> None:
    options: dict[str, Any] = {}
    if store == "postgres":
        options["database_url"] = require_postgres()
        reset_database(options["database_url"])
    server.reply = agent

    async def first_process() -> None:
        async with AsyncLamina(settings(data_dir, server, "openai", **options)) as ms:
            model = ms.context_model()
            with session_scope(S):
                await model.generate(request(("user", "is staging healthy?"), system=ON_CALL))
            await model.aclose()

    async def second_process() -> None:
        async with AsyncLamina(settings(data_dir, server, "openai", **options)) as ms:
            model = ms.context_model()
            with session_scope(S):
                await model.generate(request(("user", "why?")))
            # The conversation came back, and its base prompt with it.
            assert [m["content"] for m in server.chat_requests[-1]["messages"][1:]] == [
                "is staging healthy?",
                "ok: is staging healthy?",
                "why?",
            ]
            assert system_sent(server) == ON_CALL
            # Deleting the session's conversation takes its base prompt too.
            await ms.sessions.delete_messages(S)
            assert await ms.sessions.system_prompt(S) is None
            with session_scope(S):
                await model.generate(request(("user", "hello again")))
            assert "system" not in [m["role"] for m in server.chat_requests[-1]["messages"]]
            await model.aclose()

    asyncio.run(first_process())
    asyncio.run(second_process())


def test_runtime_alone_adds_the_runtime_context(server: FakeOpenAI, data_dir: Path) -> None:
    async def scenario() -> None:
        async with AsyncLamina(settings(data_dir, server, "openai")) as ms:
            assert ms.context.runtime_context is None
            runtime = RuntimeContextAdapter(active_tool_count=3, encryption_enabled=True)
            model = ms.context_model(runtime=runtime)
            await model.generate(request(("user", "hi"), system="Base."))
            assert system_sent(server) == (
                "Base.\n\n## Runtime Context\n- Session: none | Channel: direct | Tools: 3 | "
                "Encryption: true | Knowledge: true | Memory: true"
            )
            with session_scope("telegram:42:7"):
                await model.generate(request(("user", "hi")))
            assert system_sent(server) == (
                "## Runtime Context\n- Session: telegram:42:7 | Channel: telegram | Tools: 3 | "
                "Encryption: true | Knowledge: true | Memory: true"
            )
            # The model's adapter wins over the one set on ms.context.
            ms.context.runtime_context = RuntimeContextAdapter(active_tool_count=9)
            await model.generate(request(("user", "hi"), system="Base."))
            assert "Tools: 3" in system_sent(server) and "Tools: 9" not in system_sent(server)
            # retrieve and build_prompt take the adapter for one call the same way.
            found = await ms.context.retrieve("state", layers=["runtime_context"], runtime=runtime)
            [item] = found.items[ContextLayer.RUNTIME_CONTEXT]
            assert "Tools: 3" in item.content
            prompt = await ms.context.build_prompt("B.", "state", layers=["runtime_context"])
            assert "Tools: 9" in prompt
            await model.aclose()

    asyncio.run(scenario())


def test_opting_out_keeps_no_base_prompt(server: FakeOpenAI, data_dir: Path) -> None:
    async def scenario() -> None:
        async with AsyncLamina(settings(data_dir, server, "openai")) as ms:
            manual = ms.context_model(append_turn=False, include_history=False)
            with session_scope(S):
                await manual.generate(request(("user", "hi"), system=ON_CALL))
                assert await ms.sessions.system_prompt(S) is None
                await ms.sessions.set_system_prompt(S, RELEASE)
                await manual.generate(request(("user", "hi")))
            # The caller keeps the conversation (and its prompt) itself: nothing is added.
            assert system_sent(server) == ""
            assert await ms.sessions.system_prompt(S) == RELEASE
            await manual.aclose()

    asyncio.run(scenario())


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_a_bad_base_prompt_is_refused_and_the_kept_one_stays(
    store: str, server: FakeOpenAI, data_dir: Path
) -> None:
    options: dict[str, Any] = {}
    if store == "postgres":
        options["database_url"] = require_postgres()
        reset_database(options["database_url"])

    async def scenario() -> None:
        async with AsyncLamina(settings(data_dir, server, "openai", **options)) as ms:
            await ms.sessions.set_system_prompt(S, ON_CALL)
            # Not text, or text no store can hold (a NUL, a lone surrogate): refused the
            # same on both stores, by the library or through the model's system=.
            for bad in (42, b"bytes", "on\x00call", "on-call \ud800"):
                with pytest.raises(LaminaError) as err:
                    await ms.sessions.set_system_prompt(S, bad)  # type: ignore[arg-type]
                assert err.value.code is ErrorCode.INVALID_ARGUMENT, bad
                assert err.value.details.get("field") == "prompt", bad
            with session_scope(S), pytest.raises(LaminaError) as err:
                await ms.context_model().generate(request(("user", "hi"), system="a\x00b"))
            assert err.value.code is ErrorCode.INVALID_ARGUMENT
            longest = ms.settings.memory.max_content_length
            with pytest.raises(LaminaError) as err:
                await ms.sessions.set_system_prompt(S, "x" * (longest + 1))
            assert err.value.code is ErrorCode.CONTENT_TOO_LONG
            model = ms.context_model()
            with session_scope(S), pytest.raises(LaminaError) as err:
                await model.generate(request(("user", "hi"), system="y" * (longest + 1)))
            assert err.value.code is ErrorCode.CONTENT_TOO_LONG
            assert server.chat_requests == []
            assert await ms.sessions.system_prompt(S) == ON_CALL
            # An empty one clears it, like None.
            await ms.sessions.set_system_prompt(S, "  ")
            assert await ms.sessions.system_prompt(S) is None
            await model.aclose()

    asyncio.run(scenario())
