"""Bulk add against the embedder's own throughput on the same texts (issue 35). Prints JSON.

Each round, in one process and in turns: the local embedder alone embeds ``--texts`` texts
(as many at once as ``memory.bulk_add`` hands it), then ``memory.bulk_add`` stores the same
texts, each round's texts made new by a suffix (so neither the store's embedding cache nor the
embedder's answers a text a round before embedded), in a fresh store: the embedded SQLite
file, and PostgreSQL when ``--postgres URL`` is given (its database made anew first).
The figure is the ratio of the medians: bulk add's seconds over the embedder's (target: at
most 1.2).

    .venv/bin/python -m benchmarks.bulk_add [--texts 2000] [--rounds 3] [--postgres URL]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.corpus import sentences
from benchmarks.postgres_ops import reset
from lamina import Lamina
from lamina.embeddings.local import LocalEmbedder


def _bulk_add(texts: list[str], postgres: str | None) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        extra: dict[str, Any] = {}
        if postgres:
            reset(postgres)
            extra["database_url"] = postgres
        with Lamina(data_dir=Path(tmp), **extra) as ms:
            ms.memory.add("warm up the store and the model", layer="user", user_id="warm")
            items = [{"content": t, "layer": "user", "user_id": "u"} for t in texts]
            start = time.perf_counter()
            ms.memory.bulk_add(items)
            return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL (made anew)")
    args = parser.parse_args()
    base = sentences(args.texts, seed=77)
    embedder = LocalEmbedder()
    embedder.embed_sync(["warm up"])
    stores = {"sqlite": None, **({"postgres": args.postgres} if args.postgres else {})}
    seconds: dict[str, list[float]] = {"embedder": [], **{name: [] for name in stores}}
    turn = 0
    for _ in range(args.rounds):
        for name, url in stores.items():
            turn += 1
            start = time.perf_counter()
            embedder.embed_sync([f"{t} (round {turn}a)" for t in base])
            seconds["embedder"].append(time.perf_counter() - start)
            seconds[name].append(_bulk_add([f"{t} (round {turn}b)" for t in base], url))
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    print(
        json.dumps(
            {
                "benchmark": "bulk_add",
                "texts": args.texts,
                "rounds": args.rounds,
                "embedder_texts_per_second": round(args.texts / medians["embedder"], 1),
                **{
                    f"{name}_memories_per_second": round(args.texts / medians[name], 1)
                    for name in stores
                },
                **{
                    f"{name}_over_embedder": round(medians[name] / medians["embedder"], 3)
                    for name in stores
                },
                "seconds": {k: [round(x, 3) for x in v] for k, v in seconds.items()},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
