"""One ranking, two backends: the embedded store and PostgreSQL, loaded with the same
thousands of memories (plain sentences, and LoCoMo conversations stored as messages with
their neighbourhoods), answer a few hundred queries with the same hits, in the same order,
with the same scores and score parts, in every mode, with the service's default arguments."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from benchmarks.corpus import queries, sentences

from lamina.embeddings.local import LocalEmbedder
from lamina.memory.filters import MetadataFilter, parse_filter
from lamina.memory.layers import MemoryLayer
from lamina.memory.models import SearchMode
from lamina.memory.ports import LayerSearch, NewMemory, Scope, ScoredMemory
from lamina.memory.scoring import QuerySignals
from lamina.store.postgres import PostgresStore
from lamina.store.sqlite import SQLiteStore
from lamina.text import analyze
from tests.pg import empty_database, require_postgres

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow

LOCOMO = Path(__file__).resolve().parents[2].parent / "shared" / "eval" / "locomo-dev.json"
TENANT = "parity"
PLAIN = Scope(MemoryLayer.USER, {"user_id": "plain"}, "plain")
TALK = Scope(MemoryLayer.USER, {"user_id": "talk"}, "talk")
#: The service's defaults: threshold 0.7, twice the limit of 10 per layer, hybrid weight 0.5.
THRESHOLD, LIMIT = 0.7, 20


def _conversations() -> list[list[dict[str, Any]]]:
    """LoCoMo's first conversation, one list of turns per session (a synthetic one when the
    evaluation data is not beside the checkout)."""
    if not LOCOMO.is_file():
        words = sentences(400, seed=11)
        return [
            [
                {"speaker": ["Ana", "Ben"][i % 2], "text": words[s * 40 + i], "when": None}
                for i in range(40)
            ]
            for s in range(10)
        ]
    conversation = json.loads(LOCOMO.read_text(encoding="utf-8"))[0]["conversation"]
    out = []
    for key in sorted(
        (k for k in conversation if re.fullmatch(r"session_\d+", k)),
        key=lambda k: int(k.split("_")[1]),
    ):
        try:
            when = datetime.strptime(
                conversation[f"{key}_date_time"], "%I:%M %p on %d %B, %Y"
            ).replace(tzinfo=UTC)
        except (KeyError, ValueError):
            when = None
        out.append(
            [{"speaker": t["speaker"], "text": t["text"], "when": when} for t in conversation[key]]
        )
    return out


def _questions() -> list[str]:
    if not LOCOMO.is_file():
        return [f"what did Ana say about {w}" for w in sentences(150, seed=5)]
    sample = json.loads(LOCOMO.read_text(encoding="utf-8"))[0]
    return [q["question"] for q in sample["qa"] if q.get("evidence")][:150]


class Stores:
    def __init__(self, tmp_path: Path) -> None:
        url = require_postgres()
        empty_database(url)
        self.embedder = LocalEmbedder()
        self.runner = asyncio.Runner()
        self.sqlite = SQLiteStore(tmp_path / "parity.db", self.embedder)
        # Wide HNSW search: at this size the index then returns the exact nearest.
        self.postgres = PostgresStore(url, self.embedder, pool_max=4, ef_search=1000)
        for store in (self.sqlite, self.postgres):
            self.runner.run(store.initialize())

    def close(self) -> None:
        for store in (self.sqlite, self.postgres):
            self.runner.run(store.shutdown())
        self.runner.close()

    def load(self) -> None:
        texts = sentences(2500, seed=21)
        plain = self.embedder.embed_sync(texts)
        sessions = _conversations()
        turns = [t for session in sessions for t in session]
        talk = iter(self.embedder.embed_sync([t["text"] for t in turns]))
        tags = ["ops", "ui", "db"]
        rows = [
            NewMemory(
                f"plain-{i}", TENANT, PLAIN, text, {"tags": [tags[i % 3]], "n": i % 7}, plain[i]
            )
            for i, text in enumerate(texts)
        ]
        vectors = list(talk)
        # Both stores load at once (the SQLite store works in a thread, PostgreSQL in its
        # server), each the same rows in the same order.

        async def load(store: SQLiteStore | PostgresStore) -> None:
            await store.memories.writes.bulk_add(rows)
            k = 0
            for number, session in enumerate(sessions):
                batch = []
                for turn in session:
                    conversation = {
                        "id": f"session-{number}",
                        "speaker": turn["speaker"],
                        "role": "user",
                        "timestamp": (turn["when"] or datetime(2024, 1, 1, tzinfo=UTC)).isoformat(),
                    }
                    batch.append(
                        NewMemory(
                            f"turn-{k}",
                            TENANT,
                            TALK,
                            turn["text"],
                            {"conversation": conversation},
                            vectors[k],
                        )
                    )
                    k += 1
                await store.memories.writes.add_messages(batch)
            # A few changes, the same on both: deleted and rewritten turns renew neighbours.
            await store.memories.writes.bulk_delete(TENANT, ["turn-5", "turn-40", "plain-7"])
            await store.memories.writes.update(
                TENANT,
                "turn-60",
                content="I repainted the kitchen in bright yellow",
                embedding=repaint,
            )

        repaint = self.embedder.embed_sync(["I repainted the kitchen in bright yellow"])[0]

        async def both() -> None:
            await asyncio.gather(load(self.sqlite), load(self.postgres))

        self.runner.run(both())

    def search(self, cases: list[tuple[Scope, str, Any, MetadataFilter]]) -> list[Any]:
        """For each case (scope, query, vector, filter) and mode: both stores' hits."""

        async def run() -> list[Any]:
            out = []
            for scope, query, vector, flt in cases:
                for mode in SearchMode:
                    request = LayerSearch(
                        TENANT,
                        scope,
                        mode,
                        query,
                        None if mode is SearchMode.KEYWORD else vector,
                        () if mode is SearchMode.SEMANTIC else tuple(analyze(query)),
                        THRESHOLD,
                        LIMIT,
                        flt,
                        0.5,
                        QuerySignals.of(query),
                    )
                    a, b = await asyncio.gather(
                        self.sqlite.memories.reads.search(request),
                        self.postgres.memories.reads.search(request),
                    )
                    what = f"{mode.value} {query!r}"
                    # As many candidates below the threshold (PostgreSQL counts some of
                    # them from bounds on its own cosines).
                    assert a.below_threshold == b.below_threshold, what
                    out.append((what, a.hits, b.hits))
            return out

        result: list[Any] = self.runner.run(run())
        return result


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stores]:
    both = Stores(tmp_path_factory.mktemp("parity"))
    try:
        both.load()
        yield both
    finally:
        both.close()


def _same(a: list[ScoredMemory], b: list[ScoredMemory], what: str) -> None:
    """The same hits in the same order, with the same parts and scores to the last bit."""
    assert [h.entry.id for h in a] == [h.entry.id for h in b], what
    for x, y in zip(a, b, strict=True):
        assert x.parts == y.parts, (what, x.entry.id, x.parts, y.parts)
        assert x.score == y.score, (what, x.entry.id)


def test_both_stores_rank_the_same(stores: Stores) -> None:
    plain_queries = queries(150, seed=17)
    talk_queries = _questions()
    vectors = stores.embedder.embed_sync(plain_queries + talk_queries)
    cases = [(PLAIN, q, vectors[i], MetadataFilter()) for i, q in enumerate(plain_queries)]
    cases += [
        (TALK, q, vectors[len(plain_queries) + i], MetadataFilter())
        for i, q in enumerate(talk_queries)
    ]
    assert len(cases) >= 300
    results = stores.search(cases)
    for what, a, b in results:
        _same(a, b, what)
    assert sum(bool(a) for _, a, _ in results) > len(results) // 2  # not only empty lists


def test_filters_and_renewed_neighbourhoods_rank_the_same(stores: Stores) -> None:
    flt = parse_filter(["ops", "db"], {"n": {"gte": 2}})
    plain = queries(40, seed=3)
    vectors = stores.embedder.embed_sync([*plain, "who repainted the kitchen yellow?"])
    cases = [(PLAIN, q, vectors[i], flt) for i, q in enumerate(plain)]
    cases.append((TALK, "who repainted the kitchen yellow?", vectors[-1], MetadataFilter()))
    results = stores.search(cases)
    for what, a, b in results:
        _same(a, b, what)
    hybrid = next(a for what, a, _ in results if what.startswith("hybrid 'who"))
    assert hybrid and hybrid[0].entry.id == "turn-60"
