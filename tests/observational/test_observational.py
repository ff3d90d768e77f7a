"""Observational memory end to end, against a fake OpenAI-compatible server that records
every request: thresholds, prompts, failures, compaction, restart, concurrency, the buffer."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

from lamina import AsyncLamina, ErrorCode, Lamina, LaminaError
from lamina.buffer import BackgroundBuffer
from lamina.config import Settings
from tests.cli.runner import run, run_json
from tests.conftest import fast_settings
from tests.fakes.openai_server import Failure, FakeOpenAI
from tests.pg import empty_database, require_postgres

S = "telegram:42:7"
# About 16 tokens each (cl100k_base).
LINE = "message {i}: the staging cluster shows replication lag after the nightly deploy"


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        server.reply = reply
        yield server


def reply(body: dict[str, Any]) -> str:
    system = body["messages"][0]["content"]
    text = body["messages"][-1]["content"]
    kind = "REFLECTION" if system.startswith("You condense") else "OBSERVATION"
    return f"{kind} of {len(text.splitlines())} lines: the user fights replication lag."


def untimed(line: str) -> str:
    """An observer input line without its leading "[YYYY-MM-DD HH:MM] "."""
    assert re.match(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d\] ", line), line
    return line.split("] ", 1)[1]


def om_settings(data_dir: Path, server: FakeOpenAI, **om: Any) -> Settings:
    options = {
        "enabled": True,
        "message_token_threshold": 60,
        "observation_token_threshold": 1000,
        **om,
    }
    return fast_settings(
        data_dir,
        llm={
            "model": "fake-observer",
            "base_url": server.base_url,
            "max_retries": 0,
            "timeout_seconds": 2,
        },
        observational_memory=options,
    )


def add(ms: Lamina, n: int, start: int = 0, session: str = S) -> None:
    """n messages in one append (one transaction, at most one trigger)."""
    ms.sessions.append_many(
        session,
        [
            {"role": "user" if i % 2 == 0 else "assistant", "content": LINE.format(i=i)}
            for i in range(start, start + n)
        ],
    )


def test_the_observer_fires_when_unobserved_tokens_reach_the_threshold(
    data_dir: Path, llm: FakeOpenAI
) -> None:
    with Lamina(om_settings(data_dir, llm)) as ms:
        total = ms.sessions.append(S, "user", LINE.format(i=0)).token_count
        total += ms.sessions.append(
            S,
            "assistant",
            "ok",
            tool_calls=[{"name": "pg_stat", "input": "lag", "output": "30s behind"}],
        ).token_count
        per, i = total // 2, 1
        while True:
            per = ms.sessions.messages(S)[0].token_count
            if total + per >= 60:
                break
            total += ms.sessions.append(S, "user", LINE.format(i=i)).token_count
            i += 1
        ms.sessions.flush()
        assert llm.chat_requests == []  # below the threshold: no LLM call
        ms.sessions.append(S, "user", LINE.format(i=i))  # reaches it
        ms.sessions.flush()
        assert len(llm.chat_requests) == 1
        body = llm.chat_requests[0]
        assert body["model"] == "fake-observer"
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        assert "decisions" in system and "Never copy tool output verbatim" in system
        # Each message with the time it was sent (UTC), so notes keep "when".
        first = ms.sessions.messages(S)[0]
        when = first.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
        assert user.splitlines()[0] == f"[{when}] [user]: {LINE.format(i=0)}"
        assert "time it was sent (UTC)" in system
        assert "  [tool:pg_stat] lag" in user and "  [result] 30s behind" in user
        view = ms.sessions.show(S)
        assert len(view.messages) == i + 2  # without a compactor every message stays
        [obs] = view.observations
        assert obs.content.startswith("OBSERVATION") and obs.token_count > 0
        assert (obs.source_start, obs.source_end) == (0, len(view.messages) - 1)
        assert view.observed_through == len(view.messages) - 1 and view.unobserved_tokens == 0


def test_reflections_replace_observations_and_consolidate(data_dir: Path, llm: FakeOpenAI) -> None:
    settings = om_settings(
        data_dir, llm, observation_token_threshold=30, reflection_consolidation_threshold=3
    )
    with Lamina(settings) as ms:
        for round_ in range(6):
            add(ms, 5, start=round_ * 5)
            ms.sessions.flush()
        reflections = ms.sessions.reflections(S)
        observations = ms.sessions.observations(S)
        generations = [r.generation for r in reflections]
        assert max(generations) == 2 and len(reflections) < 3
        assert all(r.content.startswith("REFLECTION") for r in reflections)
        # A meta-reflection covers every message its reflections covered.
        assert min(r.source_start for r in reflections) == 0
        covered = max([r.source_end for r in reflections] + [o.source_end for o in observations])
        assert covered == 29
        reflector_inputs = [
            b["messages"][-1]["content"]
            for b in llm.chat_requests
            if b["messages"][0]["content"].startswith("You condense")
        ]
        assert reflector_inputs[0].startswith("Observation 1:")
        assert any(text.startswith("Reflection 1 (gen 1):") for text in reflector_inputs)
        # The prompt gets reflections before observations, within the budget.
        prompt = ms.context.build_prompt("Base.", "replication lag", session_key=S)
        memory = prompt.split("## Conversation Memory", 1)[1]
        assert "### Summary\nREFLECTION" in memory


def test_failures_keep_the_history_and_the_next_trigger_retries(
    data_dir: Path, llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    with Lamina(om_settings(data_dir, llm)) as ms:
        llm.fail_next(Failure(500))
        with caplog.at_level(logging.WARNING):
            add(ms, 5)
            ms.sessions.flush()
        assert ms.sessions.observations(S) == [] and "observer failed" in caplog.text
        assert len(ms.sessions.messages(S)) == 5
        for failure in (
            Failure(200, delay=3.0),
            Failure(200, body='{"choices": []}'),
            Failure(200, body="not json"),
        ):
            llm.fail_next(failure)
            add(ms, 1, start=100)
            ms.sessions.flush()
            assert ms.sessions.observations(S) == []
        llm.reply = lambda body: "   "  # an empty observation is a failure too
        add(ms, 1, start=200)
        ms.sessions.flush()
        assert ms.sessions.observations(S) == []
        llm.reply = reply
        add(ms, 1, start=300)
        ms.sessions.flush()
        [obs] = ms.sessions.observations(S)
        assert (obs.source_start, obs.source_end) == (0, 9)  # everything, nothing lost
        # On demand, a failure is an error the caller sees.
        add(ms, 1, start=400)
        llm.fail_next(Failure(401))
        with pytest.raises(LaminaError) as err:
            ms.sessions.observe(S)
        assert err.value.code is ErrorCode.UNAUTHORIZED


def test_compaction_replaces_observed_messages_and_survives_a_restart(
    data_dir: Path, llm: FakeOpenAI
) -> None:
    settings = om_settings(data_dir, llm, compact=True)
    with Lamina(settings) as ms:
        add(ms, 5)
        ms.sessions.flush()
        messages = ms.sessions.messages(S)
        assert messages[0].role == "system"
        assert messages[0].content.startswith("[Compacted Summary]\nOBSERVATION")
        assert len(messages) == 1
        [obs] = ms.sessions.observations(S)
        assert (obs.source_start, obs.source_end) == (0, 0)  # the index was reset
        add(ms, 2, start=5)
        assert [m.index for m in ms.sessions.messages(S)] == [0, 1, 2]
    with Lamina(settings) as again:  # a restart rebuilds the position from the ranges
        view = again.sessions.show(S)
        assert view.observed_through == 0 and [m.index for m in view.messages] == [0, 1, 2]
        add(again, 3, start=7)
        again.sessions.flush()
        # Only what came after the first observation was observed (not the summary).
        observed = llm.chat_requests[-1]["messages"][-1]["content"].splitlines()
        assert untimed(observed[0]) == f"[assistant]: {LINE.format(i=5)}" and len(observed) == 5
        assert len(again.sessions.messages(S)) == 1  # compacted again


def test_without_a_compactor_a_restart_resumes_after_the_observed_range(
    data_dir: Path, llm: FakeOpenAI
) -> None:
    with Lamina(om_settings(data_dir, llm)) as ms:
        add(ms, 5)
        ms.sessions.flush()
        add(ms, 2, start=5)  # below the threshold: not observed yet
    calls = len(llm.chat_requests)
    with Lamina(om_settings(data_dir, llm)) as again:
        add(again, 3, start=7)
        again.sessions.flush()
        assert len(llm.chat_requests) == calls + 1
        last = again.sessions.observations(S)[-1]
        assert (last.source_start, last.source_end) == (5, 9)
        first_line = llm.chat_requests[-1]["messages"][-1]["content"].splitlines()[0]
        assert untimed(first_line) == f"[assistant]: {LINE.format(i=5)}"


def test_one_observer_per_session_even_with_concurrent_triggers(
    data_dir: Path, llm: FakeOpenAI, tmp_path: Path
) -> None:
    slow = threading.Event()

    def slow_reply(body: dict[str, Any]) -> str:
        slow.wait(0.3)
        return reply(body)

    llm.reply = slow_reply
    settings = om_settings(data_dir, llm, workers=4)
    other_dir = tmp_path / "second"
    with (
        Lamina(settings) as one,
        Lamina(
            om_settings(data_dir, llm, workers=4)
            .model_copy(update={"data_dir": other_dir})
            .model_copy(update={"database_url": f"sqlite:///{data_dir / 'lamina.db'}"})
        ) as two,
    ):
        add(one, 5)
        for ms in (one, two):  # both processes' buffers ask for the same session
            for _ in range(5):
                ms.aio.sessions.buffer.trigger(("default", S))
        one.sessions.flush()
        two.sessions.flush()
        observations = one.sessions.observations(S)
        assert len(observations) == 1 and len(llm.chat_requests) == 1


def test_the_buffer_drops_when_full_and_counts(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        gate = asyncio.Event()
        seen: list[str] = []

        async def process(key: str) -> None:
            await gate.wait()
            seen.append(key)

        buffer: BackgroundBuffer[str] = BackgroundBuffer("test buffer", process, queue_size=2)
        assert not buffer.trigger("early") and buffer.dropped_count() == 1  # not started
        buffer.start()
        assert buffer.trigger("a")
        await asyncio.sleep(0.01)  # the worker takes "a" and waits
        assert buffer.trigger("b") and buffer.trigger("c")
        assert buffer.trigger("b")  # already queued: coalesced, not dropped
        with caplog.at_level(logging.WARNING):
            assert not buffer.trigger("d")  # the queue is full
        assert buffer.dropped_count() == 2 and "'d'" in caplog.text
        gate.set()
        await buffer.stop()
        assert seen == ["a", "b", "c"]  # shutdown finished the work in progress and queued
        assert not buffer.trigger("e") and buffer.dropped_count() == 3

    asyncio.run(scenario())


def test_disabled_means_nothing_happens(data_dir: Path, llm: FakeOpenAI) -> None:
    with Lamina(om_settings(data_dir, llm, enabled=False)) as ms:
        add(ms, 20)
        ms.sessions.flush()
        assert llm.chat_requests == [] and ms.sessions.observations(S) == []
        prompt = ms.context.build_prompt("Base.", "replication lag", session_key=S)
        assert prompt == "Base."


def test_enabled_without_a_model_is_a_configuration_error(data_dir: Path) -> None:
    with pytest.raises(LaminaError) as err:
        Lamina(fast_settings(data_dir, observational_memory={"enabled": True}))
    assert err.value.code is ErrorCode.CONFIGURATION_ERROR


def test_the_observer_model_falls_back_to_the_primary_one(data_dir: Path, llm: FakeOpenAI) -> None:
    with FakeOpenAI() as own:
        own.reply = reply
        settings = om_settings(data_dir, llm, model="own-model", base_url=own.base_url)
        with Lamina(settings) as ms:
            add(ms, 5)
            ms.sessions.flush()
        assert [b["model"] for b in own.chat_requests] == ["own-model"]
        assert llm.chat_requests == []


def test_context_limits_and_budget(data_dir: Path, llm: FakeOpenAI) -> None:
    settings = om_settings(
        data_dir, llm, max_observations_in_context=2, max_reflections_in_context=1
    )
    with Lamina(settings) as ms:
        for i in range(4):
            ms.sessions.append(S, "user", f"turn {i} " + LINE.format(i=i))
            ms.sessions.observe(S)
        assert len(ms.sessions.observations(S)) == 4
        assert len(ms.sessions.observations(S, limit=3)) == 3
        prompt = ms.context.build_prompt("Base.", "replication lag", session_key=S)
        assert prompt.count("\n- OBSERVATION") == 2
        ms.sessions.reflect(S)
        assert ms.sessions.observations(S) == [] and len(ms.sessions.reflections(S)) == 1
        assert ms.sessions.delete_reflections(S) == 1
        assert ms.sessions.delete_reflections(S) == 0
        assert ms.sessions.delete_observations("nobody") == 0


def test_recent_messages_fit_their_budget(data_dir: Path, llm: FakeOpenAI) -> None:
    with Lamina(
        om_settings(data_dir, llm, max_message_token_budget=60, message_token_threshold=10_000)
    ) as ms:
        add(ms, 10)
        recent = ms.sessions.recent_messages(S)
        assert 0 < len(recent) < 10 and recent[-1].index == 9
        assert sum(m.token_count + 4 for m in recent) <= 60


def test_bad_input_is_refused_and_stores_nothing(data_dir: Path, llm: FakeOpenAI) -> None:
    with Lamina(om_settings(data_dir, llm)) as ms:
        cases: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = [
            (ms.sessions.append, ("", "user", "x"), {}),
            (ms.sessions.append, (S, "robot", "x"), {}),
            (ms.sessions.append, (S, "user", ""), {}),
            (ms.sessions.append, (S, "user", 5), {}),
            (ms.sessions.append, (S, "user", "x"), {"tool_calls": "grep"}),
            (ms.sessions.append, (S, "user", "x"), {"tool_calls": [{"input": 1}]}),
            (ms.sessions.append, (S, "user", "x"), {"tool_calls": [{"name": "a", "x": 1}]}),
            (ms.sessions.compact, (S, 0, ""), {}),
            (ms.sessions.compact, (S, 5, "summary"), {}),
            (ms.sessions.compact, (S, "0", "summary"), {}),
            (ms.sessions.messages, (S,), {"start": -1}),
            (ms.sessions.observations, (S,), {"limit": 0}),
            (ms.sessions.append, (S, "user", "x"), {"tenant_id": ""}),
        ]
        for call, args, kwargs in cases:
            with pytest.raises(LaminaError) as err:
                call(*args, **kwargs)
            assert err.value.code in (ErrorCode.INVALID_ARGUMENT, ErrorCode.MISSING_IDENTIFIER)
        with pytest.raises(LaminaError) as err:
            ms.sessions.append(S, "user", "x" * 70_000)
        assert err.value.code is ErrorCode.CONTENT_TOO_LONG
        assert ms.sessions.messages(S) == [] and ms.sessions.list_sessions() == []


def test_the_cli(
    capsys: pytest.CaptureFixture[str],
    data_dir: Path,
    llm: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LAMINA_LLM__MODEL", "fake-observer")
    monkeypatch.setenv("LAMINA_LLM__BASE_URL", llm.base_url)
    out = run_json(
        capsys,
        data_dir,
        "session",
        "append",
        S,
        "user",
        "hello, replication lag",
        "--tool-calls",
        '[{"name": "pg_stat", "input": "lag", "output": "30s"}]',
    )
    assert out["index"] == 0 and out["tool_calls"][0]["name"] == "pg_stat"
    run_json(capsys, data_dir, "session", "append", S, "assistant", "Check the WAL sender")
    observed = run_json(capsys, data_dir, "session", "observe", S)["observation"]
    assert observed["source_end"] == 1
    assert run_json(capsys, data_dir, "session", "observations", S)[0]["id"] == observed["id"]
    reflection = run_json(capsys, data_dir, "session", "reflect", S)["reflection"]
    assert reflection["generation"] == 1
    # One reflection: nothing to consolidate yet.
    assert run_json(capsys, data_dir, "session", "meta-reflect", S) == {"reflection": None}
    code, _, err = run(capsys, data_dir, "session", "meta-reflect", "")
    assert code == 1 and "INVALID_ARGUMENT" in err
    view = run_json(capsys, data_dir, "session", "show", S)
    assert view["observations"] == [] and len(view["reflections"]) == 1
    assert run_json(capsys, data_dir, "session", "list") == [{"session_key": S, "messages": 2}]
    compacted = run_json(capsys, data_dir, "session", "compact", S, "0", "greeting")
    assert compacted["content"] == "[Compacted Summary]\ngreeting"
    assert run_json(capsys, data_dir, "session", "delete-reflections", S)["deleted"] == 1
    assert run_json(capsys, data_dir, "session", "delete-observations", S)["deleted"] == 0
    code, _, err = run(capsys, data_dir, "session", "compact", S, "7", "x")
    assert code == 1 and "INVALID_ARGUMENT" in err
    code, out_text, _ = run(capsys, data_dir, "session", "show", S)
    assert code == 0 and "[Compacted Summary]" in out_text
    gone = run_json(capsys, data_dir, "session", "delete-messages", S, "--start", "1")
    assert gone == {"deleted": 1}
    code, _, err = run(capsys, data_dir, "session", "delete-messages", S, "--start", "-1")
    assert code == 1 and "INVALID_ARGUMENT" in err
    assert run_json(capsys, data_dir, "session", "delete-messages", S) == {"deleted": 1}
    assert run_json(capsys, data_dir, "session", "show", S)["messages"] == []
    assert json.loads(json.dumps(view))


def test_async_api(data_dir: Path, llm: FakeOpenAI) -> None:
    async def scenario() -> None:
        async with AsyncLamina(om_settings(data_dir, llm)) as ms:
            start = time.perf_counter()
            for i in range(6):
                await ms.sessions.append(S, "user", LINE.format(i=i))
            assert time.perf_counter() - start < 5  # appends never wait for the LLM
            await ms.sessions.flush()
            assert len(await ms.sessions.observations(S)) == 1

    asyncio.run(scenario())


def graph_reply(body: dict[str, Any]) -> str:
    system = body["messages"][0]["content"]
    if system.startswith("You extract a small knowledge graph"):
        assert body.get("response_format") == {"type": "json_object"}
        return json.dumps(
            {
                "entities": [
                    {"name": "Alice", "type": "person"},
                    {"name": "staging cluster", "type": "system"},
                    {"name": "PostgreSQL 16", "type": "system"},
                ],
                "relations": [
                    {"source": "Alice", "relation": "operates", "target": "staging cluster"},
                    {"source": "staging cluster", "relation": "runs", "target": "PostgreSQL 16"},
                    {"source": "Alice", "relation": "is", "target": "alice"},
                ],
            }
        )
    return reply(body)


def test_graph_memory_extracts_and_expands(data_dir: Path, llm: FakeOpenAI) -> None:
    llm.reply = graph_reply
    with Lamina(om_settings(data_dir, llm, graph=True)) as ms:
        add(ms, 5)
        ms.sessions.flush()
        assert ms.sessions.graph_dropped_count() == 0
        lines = ms.sessions.graph_context("What does Alice operate?", S)
        assert lines[0] == "Alice operates staging cluster"
        assert "staging cluster runs PostgreSQL 16" in lines  # two hops away from Alice
        assert ms.sessions.graph_context("What does Alice operate?", "other-session") == []
        assert ms.sessions.graph_context("no entity named here", S) == []
        prompt = ms.context.build_prompt("Base.", "What does Alice operate?", session_key=S)
        assert "## Knowledge Graph\n- Alice operates staging cluster" in prompt
        assert prompt.index("## Knowledge Graph") < prompt.index("## Conversation Memory")
        # Invalid output: a clear error on demand, nothing stored; in the background a warning.
        llm.reply = lambda body: '{"entities": "not a list"}'
        with pytest.raises(LaminaError) as err:
            ms.sessions.extract_graph(S, "Bob maintains the billing service")
        assert err.value.code is ErrorCode.PROVIDER_ERROR
        assert ms.sessions.graph_context("Bob billing", S) == []
        llm.reply = lambda body: (
            "```json\n"
            + json.dumps(
                {
                    "entities": [],
                    "relations": [
                        {"source": "Bob", "relation": "maintains", "target": "billing service"}
                    ],
                }
            )
            + "\n```"
        )
        assert ms.sessions.extract_graph(S, "Bob maintains the billing service") == (2, 1)
        assert ms.sessions.graph_context("who maintains the billing service?", S) == [
            "Bob maintains billing service"
        ]


def test_the_embedding_buffer_embeds_memories_in_the_background(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Lamina(fast_settings(data_dir)) as ms:
        entry = ms.memory.add(
            "Prefers tea over coffee in the morning",
            layer="user",
            user_id="u1",
            background_embedding=True,
        )
        assert entry.embedding_generated is False
        many = ms.memory.bulk_add(
            [
                {"content": f"note {i} about the release train", "layer": "user", "user_id": "u1"}
                for i in range(30)
            ],
            background_embedding=True,
        )
        assert not any(m.embedding_generated for m in many)
        ms.memory.flush_embeddings()
        assert ms.memory.get(entry.id).embedding_generated
        hits = ms.memory.search("morning drink preference", user_id="u1", threshold=0.3)
        assert hits and hits[0].memory.id == entry.id
        assert ms.memory.embed_pending() == 0
        assert ms.aio.memory.embedding_buffer.dropped_count() == 0
        with pytest.raises(LaminaError) as err:
            ms.memory.add("x", layer="user", user_id="u1", background_embedding="yes")
        assert err.value.code is ErrorCode.INVALID_ARGUMENT
    # Pending after a crash: stored without embedding, picked up on demand.
    from lamina.embeddings.local import LocalEmbedder
    from lamina.memory.layers import MemoryLayer
    from lamina.memory.ports import NewMemory, Scope
    from lamina.store.sqlite import SQLiteStore

    async def crash() -> None:
        store = SQLiteStore(data_dir / "lamina.db", LocalEmbedder())
        await store.initialize()
        scope = Scope(MemoryLayer.USER, {"user_id": "u1"}, "u1")
        await store.memories.writes.add(
            NewMemory("crashed", "default", scope, "left behind", {}, None)
        )
        await store.shutdown()

    asyncio.run(crash())
    assert run_json(capsys, data_dir, "memory", "embed-pending") == {"embedded": 1}


def test_one_observer_per_session_across_runtimes_on_postgres(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    url = require_postgres()
    empty_database(url)

    def slow_reply(body: dict[str, Any]) -> str:
        time.sleep(0.3)
        return reply(body)

    llm.reply = slow_reply
    settings = om_settings(tmp_path, llm, workers=4).model_copy(update={"database_url": url})
    with Lamina(settings) as one, Lamina(settings) as two:
        add(one, 5)
        for ms in (one, two):
            for _ in range(3):
                ms.aio.sessions.buffer.trigger(("default", S))
        one.sessions.flush()
        two.sessions.flush()
        assert len(one.sessions.observations(S)) == 1 and len(llm.chat_requests) == 1


def test_a_key_triggered_while_it_runs_runs_again_after() -> None:
    async def scenario() -> None:
        gate = asyncio.Event()
        runs: list[str] = []

        async def process(key: str) -> None:
            runs.append(key)
            if len(runs) == 1:
                await gate.wait()

        buffer: BackgroundBuffer[str] = BackgroundBuffer("test", process, workers=2)
        buffer.start()
        buffer.trigger("s")
        await asyncio.sleep(0.01)  # a worker is inside process("s")
        buffer.trigger("s")  # queued; the other worker must not run it concurrently
        await asyncio.sleep(0.01)
        assert runs == ["s"]
        gate.set()
        await buffer.drain()
        assert runs == ["s", "s"] and buffer.dropped_count() == 0
        await buffer.stop()

    asyncio.run(scenario())
