"""A search reaches the store while its query is still being embedded (the service starts
both at once): the store finds exactly what it finds with the vector known from the start.
The embedded store does a hybrid search's keyword side meanwhile, then the vector side."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from dataclasses import replace
from typing import Any

from lamina.memory.filters import MetadataFilter, parse_filter
from lamina.memory.models import SearchMode
from lamina.memory.ports import LayerSearch, NewMemory
from lamina.memory.scoring import QuerySignals
from lamina.text import analyze
from tests.conformance.conftest import Harness
from tests.conformance.test_store import T1, scope

TOPICS = ["deploy pipeline", "editor theme", "release notes", "database backup", "code review"]
VERBS = ["prefers", "fixed", "asked about", "documented", "rolled back"]
PEOPLE = ["Ana", "Bo", "Chen", "Dee"]


def request(query: str, mode: SearchMode, flt: MetadataFilter, **given: Any) -> LayerSearch:
    return LayerSearch(
        T1,
        scope(),
        mode,
        query,
        given.get("vector"),
        tuple(analyze(query)),
        given["threshold"],
        8,
        flt,
        signals=QuerySignals.of(query),
    )


async def later(h: Harness, vector: Any, req: LayerSearch) -> Any:
    """``req`` searched with its vector still to come, then given."""
    soon: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    search = asyncio.ensure_future(h.store.memories.reads.search(replace(req, vector_soon=soon)))
    await asyncio.sleep(0.05)  # the store starts without the vector
    assert not search.done()
    soon.set_result(vector)
    return await search


def test_a_search_whose_vector_comes_later_finds_the_same(harness: Harness) -> None:
    h = harness
    # Far more memories than either side's candidates (50 each), so that both count.
    texts = [
        f"{PEOPLE[i % 4]} {VERBS[i % 5]} the {TOPICS[(i * 7) % 5]} on day {i}" for i in range(400)
    ]
    vectors = h.embedder.embed_sync(texts)
    h.run(
        h.store.memories.writes.bulk_add(
            [
                NewMemory(str(uuid.uuid4()), T1, scope(), text, {"team": "ab"[i % 2]}, vectors[i])
                for i, text in enumerate(texts)
            ]
        )
    )
    cases = [
        ("what did Ana say about the deploy pipeline", MetadataFilter()),
        ("release notes rolled back", parse_filter(None, {"team": "a"})),
        ("who fixed the database backup", MetadataFilter()),
        ("what happened on day 217", MetadataFilter()),
        ("Chen on day 342 and day 86", parse_filter(None, {"team": "a"})),
    ]
    for query, flt in cases:
        vector = h.run(h.store.memories.embeddings.generate_embedding(T1, [query]))[0]
        # Every candidate counts: below the threshold, it is counted (``below_threshold``).
        for mode, threshold in itertools.product(
            (SearchMode.HYBRID, SearchMode.SEMANTIC), (None, 0.5)
        ):
            given = {"vector": vector, "threshold": threshold}
            known = h.run(h.store.memories.reads.search(request(query, mode, flt, **given)))
            found = h.run(later(h, vector, request(query, mode, flt, threshold=threshold)))
            assert known.hits or known.below_threshold, (query, mode)
            assert [(s.entry.id, s.parts) for s in found.hits] == [
                (s.entry.id, s.parts) for s in known.hits
            ]
            assert found.below_threshold == known.below_threshold
