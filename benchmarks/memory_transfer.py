"""Export and import of memories (issue 15), on the embedded store and PostgreSQL. Prints JSON.

For each store: fill an empty store with ``--size`` memories (one tenant, 100 users, tags
and numbers in their metadata, vectors stored with them), then ``--repeat`` times: export
every memory with its vector and history to a JSONL file through the library
(``ms.memory.export``), and import that file into an empty store of the same kind
(``ms.memory.import_``: every line checked first, then stored 1,000 per transaction with
the vectors of the file, nothing re-embedded; on PostgreSQL, connecting as a superuser to
an empty database, the vector index is built once after the rows); finally export the
imported store and compare the two files byte for byte.

Rates are records per second, medians over the repeats: of wall time (``*_per_s``) and of
this process's CPU time (``*_per_cpu_s``: what the library code costs, whatever else the
shared machine runs; PostgreSQL's own CPU is not in it). ``peak_rss_mb`` is the process's
peak resident memory: export and import stream, so it does not grow with the size.

    .venv/bin/python -m benchmarks.memory_transfer [--size 100000] [--repeat 3] \\
        [--stores sqlite,postgresql]

PostgreSQL: LAMINA_BENCH_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/
lamina_bench); its public schema is emptied before each fill and each import.

The vectors (``--vectors``) are by default the local model's embeddings of the texts, as an
export of a real store holds them, cached in ~/.cache/lamina-bench (the first run at 100k
embeds for about 8 minutes on two cores). Export and import never compute a vector, but
PostgreSQL's vector index is built in the import and its build time depends on them:
``--vectors random`` (random unit vectors, no corpus to embed) is the worst case for it,
about three times slower to index than model embeddings at 100k.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
from tests.pg import reset_database

from benchmarks.corpus import sentences

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/lamina_bench"


def open_lamina(kind: str, target: str) -> Any:
    from lamina import Lamina

    if kind == "postgresql":
        return Lamina(database_url=target, data_dir=tempfile.mkdtemp(prefix="lamina-pg-"))
    return Lamina(data_dir=target)


def corpus(size: int, vectors: str) -> tuple[list[str], np.ndarray]:
    """The texts and their vectors: the model's (cached) or random unit vectors."""
    texts = sentences(size, numbered=True)
    if vectors == "model":
        from benchmarks.memory_ops import corpus_vectors

        return texts, corpus_vectors(texts).astype(np.float32)
    rng = np.random.default_rng(5)
    matrix = rng.standard_normal((size, 384)).astype(np.float32)
    return texts, matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def fill(kind: str, target: str, texts: list[str], vectors: np.ndarray) -> float:
    """``size`` memories through the store's bulk_add (on PostgreSQL the vector index is
    built after them, as ``bulk_loading`` does); seconds taken."""
    from lamina.memory.layers import MemoryLayer
    from lamina.memory.ports import NewMemory, Scope

    size = len(texts)

    def memory(i: int) -> NewMemory:
        user = f"user-{i % 100}"
        return NewMemory(
            str(uuid.uuid4()),
            "default",
            Scope(MemoryLayer.USER, {"user_id": user}, user),
            texts[i],
            {"i": i, "tags": [f"t{i % 7}"], "score": i / 3},
            vectors[i],
        )

    async def load(store: Any) -> None:
        async with store.memories.transfer.bulk_loading():
            for lo in range(0, size, 5000):
                await store.memories.writes.bulk_add(
                    [memory(i) for i in range(lo, min(size, lo + 5000))]
                )

    start = time.perf_counter()
    with open_lamina(kind, target) as ms:
        ms._run(load(ms.aio.store))
    return time.perf_counter() - start


def fill_conversations(kind: str, target: str, texts: list[str], vectors: np.ndarray) -> float:
    """The memories as conversation messages (``--shape conversations``): 100 turns a
    conversation, two speakers, 50 users, each turn with its place, speaker and time, as
    ``add_messages`` stores them; written as an export file and imported (the import
    computes every turn's neighbourhood). Seconds taken."""
    import base64

    from lamina.embeddings.local import MODEL_ID as model
    from lamina.memory.records import dump_record

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lamina-conv-") as folder:
        path = Path(folder) / "messages.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            for i, text in enumerate(texts):
                conversation, position = divmod(i, 100)
                day, minute = 1 + conversation % 28, position
                at = f"2023-05-{day:02d}T{minute // 60:02d}:{minute % 60:02d}:00Z"
                speaker = ("Ann", "user") if position % 2 == 0 else ("Bob", "assistant")
                record = {
                    "id": str(uuid.UUID(int=i + 1)),
                    "layer": "user",
                    "identifiers": {"user_id": f"user-{conversation % 50}"},
                    "content": text,
                    "metadata": {
                        "conversation": {
                            "id": f"conversation-{conversation}",
                            "position": position,
                            "speaker": speaker[0],
                            "role": speaker[1],
                            "timestamp": at,
                        }
                    },
                    "created_at": at,
                    "updated_at": at,
                    "event_at": at,
                    "embedding_model": model,
                    "embedding": base64.b64encode(vectors[i].astype("<f4").tobytes()).decode(),
                }
                handle.write(dump_record(record) + "\n")
        with open_lamina(kind, target) as ms:
            report = ms.memory.import_(path)
            assert report.imported == len(texts) and report.embedded == 0, report
    return time.perf_counter() - start


def export(kind: str, target: str, path: Path) -> tuple[float, float, int]:
    """Export with vectors and history to ``path``: records per second of wall time and of
    this process's CPU time, and the records."""
    from lamina.memory.records import dump_record

    with open_lamina(kind, target) as ms:
        ms.memory.list(user_id="warm-up", limit=1)  # opened and migrated before the clock
        done = 0
        start, cpu = time.perf_counter(), time.process_time()
        with path.open("w", encoding="utf-8") as handle:
            for record in ms.memory.export(embeddings=True, history=True):
                handle.write(dump_record(record) + "\n")
                done += 1
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        return done / wall, done / cpu, done


def import_file(kind: str, target: str, path: Path) -> tuple[float, float, dict[str, int]]:
    """Import ``path``: records per second of wall time and of this process's CPU time,
    and the import's report."""
    with open_lamina(kind, target) as ms:
        ms.memory.list(user_id="warm-up", limit=1)
        start, cpu = time.perf_counter(), time.process_time()
        report = ms.memory.import_(path)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return report.records / wall, report.records / cpu, report.model_dump()


def digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def run_store(
    kind: str, texts: list[str], vectors: np.ndarray, repeat: int, url: str, shape: str
) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"lamina-transfer-{kind}-"))

    def empty(name: str) -> str:
        if kind == "postgresql":
            reset_database(url)
            return url
        return str(work / name)

    try:
        return measure(kind, texts, vectors, repeat, work, empty, shape)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(
    kind: str,
    texts: list[str],
    vectors: np.ndarray,
    repeat: int,
    work: Path,
    empty: Any,
    shape: str = "plain",
) -> dict[str, Any]:
    size = len(texts)
    source = empty("source")
    fill_seconds = (fill if shape == "plain" else fill_conversations)(kind, source, texts, vectors)
    exported = work / "export.jsonl"
    export_rates, import_rates, identical = [], [], []
    export_cpu, import_cpu = [], []
    report: dict[str, int] = {}
    for _ in range(repeat):
        rate, cpu, count = export(kind, source, exported)
        assert count == size, (count, size)
        export_rates.append(rate)
        export_cpu.append(cpu)
    for n in range(repeat):
        target = empty(f"imported-{n}")
        rate, cpu, report = import_file(kind, target, exported)
        import_rates.append(rate)
        import_cpu.append(cpu)
        again = work / f"again-{n}.jsonl"
        export(kind, target, again)
        identical.append(digest(again) == digest(exported))
        again.unlink()
    return {
        "store": kind,
        "memories": size,
        "shape": shape,
        "fill_seconds": round(fill_seconds, 1),
        "export_file_mb": round(exported.stat().st_size / 1e6, 1),
        "export_per_s": round(statistics.median(export_rates)),
        "export_per_s_runs": [round(r) for r in export_rates],
        "export_per_cpu_s": round(statistics.median(export_cpu)),
        "import_per_s": round(statistics.median(import_rates)),
        "import_per_s_runs": [round(r) for r in import_rates],
        "import_per_cpu_s": round(statistics.median(import_cpu)),
        "import_report": report,
        "reexport_identical": all(identical),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--vectors", choices=("model", "random"), default="model")
    parser.add_argument(
        "--shape",
        choices=("plain", "conversations"),
        default="plain",
        help="plain memories, or conversation messages (100 turns a conversation)",
    )
    args = parser.parse_args()
    url = os.environ.get("LAMINA_BENCH_POSTGRES_URL", DEFAULT_URL)
    texts, vectors = corpus(args.size, args.vectors)
    results = [
        run_store(kind, texts, vectors, args.repeat, url, args.shape)
        for kind in args.stores.split(",")
    ]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "benchmark": "memory_transfer",
                "vectors": args.vectors,
                "targets": {"export_per_s": 5000, "import_per_s": 3000},
                "results": results,
                "peak_rss_mb": round(peak),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
