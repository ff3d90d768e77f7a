"""The observer on a long backlog (bounded batches), on refusals (split, never stuck), its
provider settings, and meta-reflection on demand."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lamina import ErrorCode, Lamina, LaminaError
from lamina.config import LLMSettings, ObservationalMemorySettings, Settings
from lamina.observational.service import observer_llm_settings
from lamina.tokens import batches, default_counter
from tests.conftest import fast_settings
from tests.fakes.openai_server import Failure, FakeOpenAI

S = "slack:T1:C9"
LINE = "message {i}: the staging cluster shows replication lag after the nightly deploy"


def test_batches_keep_order_and_bounds() -> None:
    """One way to cut a backlog, shared by the observer and consolidation: consecutive,
    at most the budget (an item over it alone) and, when given, at most ``size`` items."""
    assert batches([3, 3, 3, 9, 1], lambda n: n, 6) == [[3, 3], [3], [9], [1]]
    assert batches([1, 1, 1, 1, 1], lambda n: n, 100, size=2) == [[1, 1], [1, 1], [1]]
    assert batches([], lambda n: n, 5) == []


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        server.reply = lambda body: f"OBSERVATION of {len(body['messages'][-1]['content'])}"
        yield server


def settings(data_dir: Path, server: FakeOpenAI, **om: Any) -> Settings:
    return fast_settings(
        data_dir,
        llm={"model": "fake", "base_url": server.base_url, "max_retries": 0},
        observational_memory={"enabled": True, "message_token_threshold": 60, **om},
    )


def lines(n: int, start: int = 0) -> list[dict[str, str]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": LINE.format(i=i)}
        for i in range(start, start + n)
    ]


def observer_inputs(server: FakeOpenAI) -> list[str]:
    return [b["messages"][-1]["content"] for b in server.chat_requests]


def test_a_long_backlog_is_observed_in_bounded_batches(data_dir: Path, llm: FakeOpenAI) -> None:
    # 3,000 messages written while observational memory was off (~48k tokens)...
    with Lamina(fast_settings(data_dir)) as ms:
        ms.sessions.append_many(S, lines(3000))
    counter = default_counter()
    # ...then it is switched on: the next trigger observes them, 8,000 tokens at a time.
    with Lamina(settings(data_dir, llm, observer_batch_tokens=8000)) as ms:
        ms.sessions.append(S, "user", "and one more")
        ms.sessions.flush()
        inputs = observer_inputs(llm)
        assert len(inputs) >= 6
        assert all(counter.count(text) <= 8000 for text in inputs)
        notes = ms.sessions.observations(S)
        assert len(notes) == len(inputs)
        # Contiguous ranges, oldest first, covering every message.
        assert notes[0].source_start == 0 and notes[-1].source_end == 3000
        for before, after in itertools.pairwise(notes):
            assert after.source_start == before.source_end + 1
        assert ms.sessions.show(S).unobserved_tokens == 0


def test_a_refused_batch_is_split_and_never_blocks_later_triggers(
    data_dir: Path, llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    too_long = Failure(400, body='{"error": {"message": "maximum context length exceeded"}}')
    with Lamina(settings(data_dir, llm, message_token_threshold=10)) as ms:
        # The API refuses the first (whole) batch as too long: halves go through.
        llm.fail_next(too_long)
        ms.sessions.append_many(S, lines(8))
        ms.sessions.flush()
        notes = ms.sessions.observations(S)
        assert [(n.source_start, n.source_end) for n in notes] == [(0, 3), (4, 7)]

        # One message the API always refuses: the batch splits down to it, it fails alone,
        # and the next triggers fail on it again; after three refusals it is recorded as
        # it is, and the messages after it move on.
        llm.refuse = lambda body: "POISON" in body["messages"][-1]["content"]
        with caplog.at_level(logging.WARNING):
            for attempt in range(3):
                ms.sessions.append(S, "user", f"note {attempt}: " + LINE.format(i=99))
                if attempt == 0:
                    ms.sessions.append(S, "user", "POISON " + LINE.format(i=98))
                ms.sessions.flush()
            assert "recorded as it is" in caplog.text
        llm.refuse = lambda body: False
        ms.sessions.append_many(S, lines(6, start=200))
        ms.sessions.flush()
        assert ms.sessions.show(S).unobserved_tokens == 0
        verbatim = [n for n in ms.sessions.observations(S) if "POISON" in n.content]
        assert len(verbatim) == 1 and verbatim[0].source_start == verbatim[0].source_end == 9
        assert len(ms.sessions.messages(S)) == 8 + 4 + 6  # nothing lost

        # Failures that a smaller request does not fix are not split: an auth error fails
        # the run once, and on demand it is the caller's error.
        before = len(llm.chat_requests)
        llm.fail_next(Failure(401))
        ms.sessions.append_many(S, lines(4, start=300))  # a background run, one request
        ms.sessions.flush()
        llm.fail_next(Failure(401))
        with pytest.raises(LaminaError) as err:
            ms.sessions.observe(S)
        assert err.value.code is ErrorCode.UNAUTHORIZED
        assert len(llm.chat_requests) == before + 2
        assert ms.sessions.show(S).unobserved_tokens > 0  # kept for the next trigger


def test_observer_settings_do_not_mix_providers(data_dir: Path, llm: FakeOpenAI) -> None:
    primary = LLMSettings(model="gpt-x", base_url="http://127.0.0.1:9/v1", api_key_env="OPENAI")
    other = observer_llm_settings(
        ObservationalMemorySettings(provider="anthropic", model="claude-x"), primary
    )
    assert (other.provider, other.model) == ("anthropic", "claude-x")
    assert other.base_url is None and other.api_key_env is None
    same = observer_llm_settings(ObservationalMemorySettings(model="gpt-small"), primary)
    assert (same.base_url, same.api_key_env) == (primary.base_url, primary.api_key_env)
    with pytest.raises(LaminaError) as err:
        observer_llm_settings(ObservationalMemorySettings(provider="anthropic"), primary)
    assert err.value.code is ErrorCode.CONFIGURATION_ERROR
    assert "observational_memory.model" in err.value.message

    # Through the runtime: an Anthropic observer talks to its own base_url, never the
    # primary OpenAI one (which points at nothing).
    config = fast_settings(
        data_dir,
        llm={"model": "gpt-x", "base_url": "http://127.0.0.1:9/v1", "max_retries": 0},
        observational_memory={
            "enabled": True,
            "provider": "anthropic",
            "model": "claude-x",
            "base_url": llm.root_url,
            "api_key_env": "FAKE_ANTHROPIC",
        },
    )
    import os

    os.environ["FAKE_ANTHROPIC"] = "sk-ant"
    try:
        with Lamina(config) as ms:
            ms.sessions.append_many(S, lines(2))
            note = ms.sessions.observe(S)
        assert note is not None and note.content.startswith("OBSERVATION")
        body = llm.chat_requests[-1]
        assert body["model"] == "claude-x" and "system" in body  # the Messages API
    finally:
        del os.environ["FAKE_ANTHROPIC"]


def test_meta_reflection_runs_on_demand(data_dir: Path, llm: FakeOpenAI) -> None:
    with Lamina(settings(data_dir, llm, message_token_threshold=10_000)) as ms:
        assert ms.sessions.meta_reflect(S) is None  # no reflections at all
        for start in (0, 10):
            ms.sessions.append_many(S, lines(4, start=start))
            ms.sessions.observe(S)
            ms.sessions.reflect(S)
        assert ms.sessions.meta_reflect(S) is not None
        [merged] = ms.sessions.reflections(S)
        assert merged.generation == 2 and (merged.source_start, merged.source_end) == (0, 7)
        assert ms.sessions.meta_reflect(S) is None  # one reflection: nothing to merge
        with pytest.raises(LaminaError) as err:
            ms.sessions.meta_reflect("")
        assert err.value.code is ErrorCode.INVALID_ARGUMENT
