"""Context retrieval plus prompt assembly with 50,000 knowledge items and 500 tools. Prints JSON.

The knowledge items are the benchmark corpus's sentences (vectors from the corpus cache,
written through the store's context-item API); the tools are 500 generated descriptors.
Measured through the library (``AsyncLamina.context``), no LLM call:

- ``default_layers``: retrieve over the default layers (user knowledge, skills, external
  references, learnings) + assemble_prompt, for queries never seen before (the query is
  embedded each time) and for repeated queries (query vector cached in-process);
- ``model_layers``: the six layers the context-aware model asks for (adds tools and runtime
  context), repeated queries.

    uv run python -m benchmarks.context_retrieval [--items 50000] [--tools 500] [--queries 200]
        [--database-url postgresql://...]

With --database-url the named database is dropped and created again (fill commits do not
wait for the disk: synchronous_commit off on that database).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from typing import Any

import psycopg

from benchmarks.corpus import OBJECTS, VERBS, queries, sentences
from benchmarks.memory_ops import corpus_vectors, ms_stats
from lamina import AsyncLamina
from lamina.context.models import MODEL_LAYERS
from lamina.context.providers import RuntimeContextAdapter, ToolDescriptor, ToolRegistryAdapter
from lamina.memory.items import ItemKind, NewContextRecord


async def fill(ms: AsyncLamina, count: int) -> float:
    texts = sentences(count if count > 100_000 else 100_000, numbered=True)[:count]
    vectors = corpus_vectors(sentences(100_000, numbered=True))[:count]
    store = ms.store.context_items
    start = time.perf_counter()
    for i, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
        await store.put_item(
            NewContextRecord(
                "default",
                ItemKind.KNOWLEDGE,
                f"k{i}",
                "fact",
                text,
                {"source": "bench", "use_count": 0, "relevance_score": 1.0},
                [],
                vector,
            ),
            versioned=True,
        )
    return count / (time.perf_counter() - start)


def tools(count: int) -> list[ToolDescriptor]:
    return [
        ToolDescriptor(
            f"tool_{i}_{VERBS[i % len(VERBS)].split()[0]}",
            f"{VERBS[i % len(VERBS)]} {OBJECTS[(i * 7) % len(OBJECTS)]}",
        )
        for i in range(count)
    ]


async def measure(ms: AsyncLamina, qs: list[str], layers: Any) -> dict[str, float]:
    times = []
    for q in qs:
        start = time.perf_counter()
        result = await ms.context.retrieve(q, layers)
        ms.context.assemble_prompt("You are a helpful assistant.", result)
        times.append(time.perf_counter() - start)
    return ms_stats(times)


def prepare_postgres(url: str) -> None:
    """An empty benchmark database that does not wait for a disk flush at every commit
    while it is filled item by item (searching is unaffected)."""
    dbname = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("SET client_min_messages = warning")
        conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{dbname}"')
        conn.execute(f'ALTER DATABASE "{dbname}" SET synchronous_commit = off')


async def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.database_url:
        prepare_postgres(args.database_url)
    with tempfile.TemporaryDirectory() as tmp:
        ms = AsyncLamina(data_dir=tmp, database_url=args.database_url)
        await ms.start()
        try:
            out: dict[str, Any] = {
                "benchmark": "context_retrieval",
                "items": args.items,
                "tools": args.tools,
                "store": ms.store.__class__.__name__,
            }
            out["fill_items_per_s"] = round(await fill(ms, args.items))
            if args.database_url:  # fresh planner statistics, as autovacuum would leave them
                with psycopg.connect(args.database_url, autocommit=True) as conn:
                    conn.execute("VACUUM ANALYZE context_items")
            ms.context.tool_registry = ToolRegistryAdapter(tools(args.tools))
            ms.context.runtime_context = RuntimeContextAdapter(active_tool_count=args.tools)
            fresh = queries(args.queries, seed=5)
            fresh = [f"{q} (variant {i})" for i, q in enumerate(fresh)]  # all distinct
            repeated = queries(args.queries, seed=99)
            await measure(ms, repeated[:20], None)  # warm: index load, caches
            await measure(ms, repeated, None)  # query vectors now cached
            out["default_layers_new_query"] = await measure(ms, fresh, None)
            out["default_layers_repeated_query"] = await measure(ms, repeated, None)
            out["model_layers_repeated_query"] = await measure(ms, repeated, MODEL_LAYERS)
            result = await ms.context.retrieve(repeated[0], MODEL_LAYERS)
            out["items_per_layer_example"] = {k.value: len(v) for k, v in result.items.items()}
            await ms.context.flush()
            return out
        finally:
            await ms.close()


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--items", type=int, default=50_000)
    parser.add_argument("--tools", type=int, default=500)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--database-url", default=None)
    print(json.dumps(asyncio.run(run(parser.parse_args())), indent=2))


if __name__ == "__main__":
    main()
