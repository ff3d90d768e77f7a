from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lamina import AsyncLamina, ErrorCode, Lamina, LaminaError
from lamina.embeddings.coalesce import Coalescer
from lamina.embeddings.local import (
    DIMENSIONS,
    PADDING_SLACK,
    LocalEmbedder,
    balanced,
    batches,
    makespan,
)
from lamina.embeddings.openai import OpenAIEmbedder
from tests.conftest import fast_settings, openai_settings
from tests.fakes.openai_server import Failure, FakeOpenAI
from tests.pg import require_postgres, reset_database


def test_local_embedder_is_normalised_and_meaningful() -> None:
    embedder = LocalEmbedder()
    vectors = embedder.embed_sync(
        ["Prefers dark mode in every editor", "editor theme", "The invoice is overdue"]
    )
    assert vectors.shape == (3, DIMENSIONS) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2
    single = embedder.embed_sync(["editor theme"])[0]
    assert float(single @ vectors[1]) > 0.999  # batching and padding change nothing
    assert embedder.embed_sync([]).shape == (0, DIMENSIONS)
    long_text = asyncio.run(embedder.embed(["word " * 2000]))
    assert long_text.shape == (1, DIMENSIONS)


def test_same_content_never_reaches_the_embedder_twice(tmp_path: Path) -> None:
    with FakeOpenAI() as server:
        settings = openai_settings(tmp_path / "d", server)
        with Lamina(settings) as ms:
            ms.memory.add("cached content", layer="user", user_id="u")
            ms.memory.add("cached content", layer="project", project_id="p")
            ms.memory.bulk_add(
                [
                    {"content": "cached content", "layer": "user", "user_id": "v"},
                    {"content": "fresh", "layer": "user", "user_id": "v"},
                    {"content": "fresh", "layer": "user", "user_id": "w"},
                ]
            )
            assert server.embedded == ["cached content", "fresh"]
            ms.memory.search("a query", user_id="u", threshold=0.0)
            ms.memory.search("a query", user_id="u", threshold=0.0)
            assert server.embedded.count("a query") == 1
        with Lamina(settings) as ms:
            ms.memory.add("cached content", layer="user", user_id="x")
            assert server.embedded.count("cached content") == 1
            ms.memory.add("cached content", layer="user", user_id="x", tenant_id="other")
            assert server.embedded.count("cached content") == 2  # caches are per tenant


def test_transient_provider_errors_are_retried(tmp_path: Path) -> None:
    with FakeOpenAI() as server, Lamina(openai_settings(tmp_path / "d", server)) as ms:
        server.fail_next(Failure(500), Failure(503))
        assert ms.memory.add("after two failures", layer="user", user_id="u").embedding_generated
        assert server.requests == 3
        server.fail_next(*[Failure(502)] * 4)
        with pytest.raises(LaminaError) as err:
            ms.memory.add("never works", layer="user", user_id="u")
        assert err.value.code is ErrorCode.PROVIDER_ERROR and err.value.retryable
        assert server.requests == 3 + 4  # the first try and 3 retries
        assert ms.memory.list(user_id="u").total_count == 1
        server.fail_next(Failure(429, {"Retry-After": "0.05"}))
        ms.memory.add("after a rate limit", layer="user", user_id="u")
        server.fail_next(*[Failure(429, {"Retry-After": "0"})] * 4)
        with pytest.raises(LaminaError) as err:
            ms.memory.add("rate limited for good", layer="user", user_id="u")
        assert err.value.code is ErrorCode.RATE_LIMITED and err.value.retryable
        assert "PROVIDER_ERROR" in ms.metrics_text() and "RATE_LIMITED" in ms.metrics_text()


def test_permanent_provider_errors_are_not_retried(tmp_path: Path) -> None:
    with FakeOpenAI() as server, Lamina(openai_settings(tmp_path / "d", server)) as ms:
        server.fail_next(Failure(401))
        with pytest.raises(LaminaError) as err:
            ms.memory.add("x", layer="user", user_id="u")
        assert err.value.code is ErrorCode.CONFIGURATION_ERROR and server.requests == 1
        server.fail_next(Failure(400))
        with pytest.raises(LaminaError) as err:
            ms.memory.add("x", layer="user", user_id="u")
        assert err.value.code is ErrorCode.EMBEDDING_FAILED and not err.value.retryable
        server.fail_next(Failure(200, body='{"data": "nonsense"}'))
        with pytest.raises(LaminaError) as err:
            ms.memory.add("x", layer="user", user_id="u")
        assert err.value.code is ErrorCode.EMBEDDING_FAILED
        assert ms.memory.list(user_id="u").total_count == 0


def test_unreachable_provider_is_a_retryable_provider_error(tmp_path: Path) -> None:
    server = FakeOpenAI()
    url = server.base_url
    server.server.server_close()  # nothing listens on that port any more
    settings = fast_settings(
        tmp_path / "d",
        embedding={"provider": "openai", "base_url": url, "model": "m", "dimensions": 8},
    )
    with Lamina(settings) as ms:
        with pytest.raises(LaminaError) as err:
            ms.memory.add("x", layer="user", user_id="u")
        assert err.value.code is ErrorCode.PROVIDER_ERROR and err.value.retryable


def test_api_key_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_EMBED_KEY", "sk-test-123")
    with FakeOpenAI() as server:
        embedder = OpenAIEmbedder(
            base_url=server.base_url, model="m", dimensions=8, api_key_env="MY_EMBED_KEY"
        )

        async def go() -> None:
            vectors = await embedder.embed(["a", "b", "c"])
            assert vectors.shape == (3, 8)
            await embedder.aclose()

        asyncio.run(go())
        assert server.auth_headers == ["Bearer sk-test-123"]


def test_a_store_opens_with_a_different_embedding_model(tmp_path: Path) -> None:
    """No refusal: it opens needing ``reembed`` (tests/store/test_reembed.py), and the old
    model still opens it as it was."""
    data_dir = tmp_path / "d"
    with Lamina(fast_settings(data_dir)) as ms:
        ms.memory.add("built with the local model", layer="user", user_id="u")
    with FakeOpenAI() as server, Lamina(openai_settings(data_dir, server)) as ms:
        status = ms.memory.embedding_status()
        assert status.reembed_needed
        assert (status.store_dimensions, status.dimensions) == (384, 8)
        assert ms.memory.search("local model", user_id="u", mode="keyword")
    with Lamina(fast_settings(data_dir)) as ms:
        assert not ms.memory.embedding_status().reembed_needed
        assert ms.memory.list(user_id="u").total_count == 1


def test_openai_settings_are_validated(tmp_path: Path) -> None:
    with pytest.raises(LaminaError) as err:
        Lamina(fast_settings(tmp_path, embedding={"provider": "openai"}))
    assert err.value.code is ErrorCode.CONFIGURATION_ERROR
    with pytest.raises(LaminaError) as err:
        Lamina(
            fast_settings(
                tmp_path,
                embedding={
                    "provider": "openai",
                    "base_url": "ftp://x",
                    "model": "m",
                    "dimensions": 3,
                },
            )
        )
    assert err.value.code is ErrorCode.CONFIGURATION_ERROR
    with pytest.raises(LaminaError) as err:
        Lamina(fast_settings(tmp_path, embedding={"model": "bge-large"}))
    assert err.value.code is ErrorCode.CONFIGURATION_ERROR


def test_overlapping_small_calls_share_one_model_run() -> None:
    model = LocalEmbedder()
    runs: list[int] = []

    def run(texts: Sequence[str]) -> Any:
        runs.append(len(texts))
        if any(t == "boom" for t in texts):
            raise ValueError("the model failed")
        return model.embed_sync(texts)

    texts = [f"note number {i} about deploys" for i in range(12)]
    together = Coalescer(run, limit=64)

    async def scenario() -> list[Any]:
        return await asyncio.gather(*(together.embed([t]) for t in texts))

    vectors = asyncio.run(scenario())
    alone = model.embed_sync(texts)
    for got, expected in zip(vectors, alone, strict=True):
        assert got.shape == (1, 384)
        assert float(np.dot(got[0], expected)) > 0.9999
    assert sum(runs) == 12 and len(runs) < 12  # batched: fewer runs than calls

    async def failing() -> list[Any]:
        return await asyncio.gather(
            together.embed(["fine"]), together.embed(["boom"]), return_exceptions=True
        )

    results = asyncio.run(failing())
    assert any(isinstance(r, ValueError) for r in results)
    assert asyncio.run(scenario())[0].shape == (1, 384)  # still serving


def test_batches_group_texts_of_close_lengths() -> None:
    lengths = [30, 5, 6, 31, 5, 60, 7, 29, 6, 5]
    groups = batches(lengths, 4)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    assert all(len(g) <= 4 for g in groups)
    for group in groups:
        sizes = [lengths[i] for i in group]
        assert sizes == sorted(sizes)  # in order of length: the last is the longest
        # Padding to the longest adds at most PADDING_SLACK of the group's tokens.
        assert sizes[-1] * len(sizes) <= (1 + PADDING_SLACK) * sum(sizes) or len(sizes) == 1
    # The short ones together, the long one alone: far fewer padded tokens than one batch.
    padded = sum(lengths[g[-1]] * len(g) for g in groups)
    assert padded < max(lengths) * len(lengths) / 2
    assert batches([], 8) == []


def test_a_batch_holding_most_of_a_call_is_split_between_the_workers() -> None:
    """27 short texts and 3 longer ones (a 30-turn add_messages call): two batches, one of
    them most of the work; run side by side, one core would wait for the other."""
    lengths = [12] * 27 + [17] * 3
    groups = batches(lengths, 64)
    assert [len(g) for g in groups] == [27, 3]
    split = balanced(groups, lengths, 2)
    assert sorted(i for g in split for i in g) == list(range(30))
    for group in split:
        assert [lengths[i] for i in group] == sorted(lengths[i] for i in group)
    # 324 padded tokens on the busier core before; about half of the 375 in all after.
    assert makespan(groups, lengths, 2) == 27 * 12
    assert makespan(split, lengths, 2) <= 1.15 * (27 * 12 + 3 * 17) / 2
    # One worker: nothing to balance. Few texts: not worth splitting.
    assert balanced(groups, lengths, 1) == groups
    assert balanced([[0, 1, 2]], [5, 5, 5], 2) == [[0, 1, 2]]
    # Already even: left as it is.
    even = [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15]]
    assert balanced(even, [10] * 16, 2) == even
    assert balanced([], [], 2) == []


def test_mixed_lengths_embed_as_each_text_alone() -> None:
    """Texts of very different lengths in one call (several batches, run side by side)
    get the vectors they get alone."""
    embedder = LocalEmbedder(batch_size=4)
    texts = [
        "ok",
        "Caroline went to the LGBTQ support group on 7 May and found it very moving. " * 3,
        "tea?",
        "We talked about the deploy pipeline, the flaky integration tests and the release.",
        "The invoice is overdue",
        *[f"short note {i}" for i in range(9)],
    ]
    together = embedder.embed_sync(texts)
    alone = np.concatenate([embedder.embed_sync([t]) for t in texts])
    assert together.shape == (len(texts), DIMENSIONS)
    assert np.all(np.sum(together * alone, axis=1) > 0.999)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_failing_query_embedding_fails_the_search_once(
    tmp_path: Path, backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The query is embedded while the stores start on keywords; its error is the search's,
    after the embedder's own retries only (the store's retry does not repeat them), and the
    store is left usable."""
    extra: dict[str, Any] = {}
    if backend == "postgres":
        url = require_postgres()
        reset_database(url)
        extra["database_url"] = url
    with (
        FakeOpenAI() as server,
        Lamina(openai_settings(tmp_path / "d", server, **extra)) as ms,
    ):
        ms.memory.add("the office moved to Lisbon", layer="user", user_id="u")
        before = server.requests
        server.fail_next(*[Failure(502)] * 4)
        with pytest.raises(LaminaError) as err:
            ms.memory.search("where is the office now?", user_id="u")
        assert err.value.code is ErrorCode.PROVIDER_ERROR
        assert server.requests == before + 4  # the first try and the embedder's 3 retries
        # ... and the store's retry does not wait and try the search again on that error.
        assert not [r for r in caplog.records if r.getMessage().startswith("search failed")]
        server.fail_next(Failure(400))
        with pytest.raises(LaminaError) as err:
            ms.memory.search("which city?", user_id="u", mode="semantic")
        assert err.value.code is ErrorCode.EMBEDDING_FAILED
        keyword = ms.memory.search("office Lisbon", user_id="u", mode="keyword", threshold=0)
        assert [h.memory.content for h in keyword] == ["the office moved to Lisbon"]
        hits = ms.memory.search("the office moved to Lisbon", user_id="u", threshold=0)
        assert hits and hits[0].parts.semantic is not None


def test_a_search_holds_no_connection_while_its_query_is_embedded(tmp_path: Path) -> None:
    """A slow embedding (here: a first answer after 1.5 s, refused, then retried) must not
    hold PostgreSQL connections: with a pool of two, a search over two layers waiting for
    its vector leaves room for other calls."""
    url = require_postgres()
    reset_database(url)

    async def scenario(server: FakeOpenAI) -> None:
        settings = openai_settings(
            tmp_path / "d",
            server,
            database_url=url,
            postgres={"pool_max": 2, "connect_timeout": 1.0},
        )
        async with AsyncLamina(settings=settings) as ms:
            await ms.memory.add("the office moved to Lisbon", layer="user", user_id="u")
            server.fail_next(Failure(503, delay=1.5))
            search = asyncio.ensure_future(
                ms.memory.search("where is the office?", user_id="u", session_id="s")
            )
            await asyncio.sleep(0.3)
            for _ in range(3):  # each would wait 1 s for a connection, then fail
                page = await ms.memory.list(user_id="u")
                assert page.total_count == 1
            assert not search.done()
            hits = await search
            assert [h.memory.content for h in hits] == ["the office moved to Lisbon"]

    with FakeOpenAI() as server:
        asyncio.run(scenario(server))
