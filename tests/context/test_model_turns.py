"""The context-aware model keeps the session's conversation, carries tool calls, streams, and
is bounded in time: against the fake OpenAI-compatible server, through the real clients."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lamina import AsyncLamina, ErrorCode, LaminaError
from lamina.config import LLMSettings
from lamina.context.aware_model import ContextAwareModel
from lamina.context.providers import session_scope
from lamina.llm import ChatMessage, build_chat_model, request
from lamina.llm.base import ChatRequest, ToolCall, ToolSpec
from tests.conftest import fast_settings
from tests.fakes.openai_server import Failure, FakeOpenAI, Reply

S = "slack:T1:C2"
WEATHER = ToolSpec(
    "get_weather",
    "The weather in a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def llm(server: FakeOpenAI, provider: str = "openai", **options: Any) -> LLMSettings:
    return LLMSettings(
        provider=provider,  # type: ignore[arg-type]
        model="fake-model",
        base_url=server.base_url if provider == "openai" else server.root_url,
        api_key_env="FAKE_KEY",
        max_retries=0,
        **options,
    )


def sent(server: FakeOpenAI, n: int = -1) -> list[dict[str, Any]]:
    """The non-system messages of the n-th chat request."""
    return [m for m in server.chat_requests[n]["messages"] if m["role"] != "system"]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KEY", "sk-test")


def test_the_turn_is_kept_in_the_session_and_history_is_sent_within_the_budget(
    server: FakeOpenAI, data_dir: Path
) -> None:
    async def scenario() -> None:
        async with AsyncLamina(fast_settings(data_dir, llm=llm(server).model_dump())) as ms:
            model = ms.context_model()
            with session_scope(S, user_id="alice"):
                await model.generate(request(("user", "our staging cluster lags"), system="B."))
                await model.generate(request(("user", "why?")))
            stored = [(m.role, m.content) for m in await ms.sessions.messages(S)]
            assert stored == [
                ("user", "our staging cluster lags"),
                ("assistant", "echo: our staging cluster lags"),
                ("user", "why?"),
                ("assistant", "echo: why?"),
            ]
            # The second call carried the conversation so far, not just "why?".
            assert [m["content"] for m in sent(server)] == [c for _, c in stored[:3]]
            await model.aclose()

            # A small budget keeps the newest messages only (the last one always).
            small = ms.context_model(message_token_budget=30)
            with session_scope(S, user_id="alice"):
                await small.generate(request(("user", "and the production cluster?")))
            contents = [m["content"] for m in sent(server)]
            assert contents[-1] == "and the production cluster?"
            assert "our staging cluster lags" not in contents and len(contents) < 5
            await small.aclose()

            # Opt-outs: the caller keeps the conversation itself.
            manual = ms.context_model(append_turn=False, include_history=False)
            before = len(await ms.sessions.messages(S))
            with session_scope(S, user_id="alice"):
                await manual.generate(request(("user", "hello"), ("user", "again")))
            assert [m["content"] for m in sent(server)] == ["hello", "again"]
            assert len(await ms.sessions.messages(S)) == before
            # Still within the budget when the caller brings the history.
            tight = ms.context_model(
                append_turn=False, include_history=False, message_token_budget=12
            )
            with session_scope(S):
                await tight.generate(request(("user", "one two three " * 5), ("user", "last")))
            assert [m["content"] for m in sent(server)] == ["last"]
            await manual.aclose()
            await tight.aclose()

            # Without a session key nothing is stored.
            plain = ms.context_model()
            await plain.generate(request(("user", "no session here")))
            assert len(await ms.sessions.messages(S)) == before
            await plain.aclose()

    run(scenario())


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_agent_loop_with_tool_calls_runs_over_the_session(
    provider: str, server: FakeOpenAI, data_dir: Path
) -> None:
    def answer(body: dict[str, Any]) -> str | Reply:
        last = body["messages"][-1]
        content = last["content"]
        is_result = last["role"] == "tool" or (
            isinstance(content, list) and content[0].get("type") == "tool_result"
        )
        if is_result:
            return "It is sunny in Paris."
        return Reply(calls=[("get_weather", {"city": "Paris"})])

    server.reply = answer

    async def scenario() -> None:
        settings = fast_settings(data_dir, llm=llm(server, provider).model_dump())
        async with AsyncLamina(settings) as ms:
            model = ms.context_model()
            with session_scope(S, user_id="alice"):
                first = await model.generate(
                    request(("user", "weather in Paris?"), tools=(WEATHER,), tool_choice="auto")
                )
                [call] = first.tool_calls
                assert call.name == "get_weather" and json.loads(call.arguments) == {
                    "city": "Paris"
                }
                body = server.chat_requests[-1]
                if provider == "openai":
                    assert body["tools"][0]["function"]["name"] == "get_weather"
                    assert body["tool_choice"] == "auto"
                else:
                    assert body["tools"][0]["input_schema"]["required"] == ["city"]
                    assert body["tool_choice"] == {"type": "auto"}
                result = ChatMessage("tool", '{"sky": "sunny"}', tool_call_id=call.id)
                final = await model.generate(ChatRequest((result,), tools=(WEATHER,)))
            assert final.content == "It is sunny in Paris." and final.tool_calls == ()
            # The second call had the user turn, the call and its result, in order.
            history = sent(server)
            if provider == "openai":
                assert [m["role"] for m in history] == ["user", "assistant", "tool"]
                assert history[1]["tool_calls"][0]["id"] == call.id
                assert history[2]["tool_call_id"] == call.id
            else:
                assert [m["role"] for m in history] == ["user", "assistant", "user"]
                assert history[1]["content"][0]["type"] == "tool_use"
                assert history[2]["content"][0]["tool_use_id"] == call.id
            stored = await ms.sessions.messages(S)
            assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
            assert stored[1].tool_calls == [
                {"id": call.id, "name": "get_weather", "input": {"city": "Paris"}, "output": None}
            ]
            assert stored[2].tool_calls[0]["name"] == "get_weather"
            await model.aclose()

    run(scenario())


def test_streaming_yields_pieces_and_keeps_the_whole_reply(
    server: FakeOpenAI, data_dir: Path
) -> None:
    server.reply = lambda body: Reply("The lag comes from the WAL sender.")

    async def scenario() -> None:
        async with AsyncLamina(fast_settings(data_dir, llm=llm(server).model_dump())) as ms:
            model = ms.context_model()
            with session_scope(S):
                chunks = [c async for c in model.stream(request(("user", "replication lag?")))]
            pieces = [c.delta for c in chunks if not c.done]
            assert len(pieces) > 3 and "".join(pieces) == "The lag comes from the WAL sender."
            assert chunks[-1].done and chunks[-1].response is not None
            assert server.chat_requests[-1]["stream"] is True
            stored = await ms.sessions.messages(S)
            assert stored[-1].content == "The lag comes from the WAL sender."

            # Tool calls come together from their streamed pieces.
            server.reply = lambda body: Reply(calls=[("get_weather", {"city": "Oslo"})])
            with session_scope(S):
                chunks = [
                    c async for c in model.stream(request(("user", "Oslo?"), tools=(WEATHER,)))
                ]
            done = chunks[-1].response
            assert done is not None
            assert done.tool_calls == (ToolCall("call_0", "get_weather", '{"city": "Oslo"}'),)
            assert (await ms.sessions.messages(S))[-1].tool_calls[0]["input"] == {"city": "Oslo"}
            await model.aclose()

            # A model without a stream of its own gives its reply as one chunk.
            anthropic = ms.context_model(build_chat_model(llm(server, "anthropic")))
            server.reply = lambda body: "whole"
            chunks = [c async for c in anthropic.stream(request(("user", "hi")))]
            assert [c.delta for c in chunks] == ["whole", ""] and chunks[-1].done
            await anthropic.aclose()

    run(scenario())


def test_an_overall_timeout_bounds_the_call(server: FakeOpenAI, data_dir: Path) -> None:
    async def scenario() -> None:
        # The client's own timeout is long: only the overall one can stop the call.
        settings = fast_settings(data_dir, llm=llm(server, timeout_seconds=30).model_dump())
        async with AsyncLamina(settings) as ms:
            model = ms.context_model(timeout=0.5)
            server.fail_next(Failure(200, delay=2.0))
            loop = asyncio.get_running_loop()
            started = loop.time()
            with session_scope(S), pytest.raises(LaminaError) as err:
                await model.generate(request(("user", "slow?")))
            assert loop.time() - started < 1.5
            assert err.value.code is ErrorCode.PROVIDER_ERROR and err.value.retryable
            assert "within 0.5 s" in err.value.message
            # The user's message was kept although the call failed.
            assert [m.content for m in await ms.sessions.messages(S)] == ["slow?"]
            server.fail_next(Failure(200, delay=2.0))
            with pytest.raises(LaminaError) as err:
                _ = [c async for c in model.stream(request(("user", "slow stream?")))]
            assert "within 0.5 s" in err.value.message
            await model.aclose()
            for bad in (0, -1.0, True):
                with pytest.raises(LaminaError) as err:
                    ContextAwareModel(model, ms.context, timeout=bad)  # type: ignore[arg-type]
                assert err.value.code is ErrorCode.INVALID_ARGUMENT

    run(scenario())
