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
lamina_bench); its public schema is emptied before each fill and each import. The vectors
are random unit vectors (export and import never compute one: the rates do not depend on
them), so no corpus needs embedding first.
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


def fill(kind: str, target: str, size: int) -> float:
    """``size`` memories through the store's bulk_add (on PostgreSQL the vector index is
    built after them, as ``bulk_loading`` does); seconds taken."""
    from lamina.memory.layers import MemoryLayer
    from lamina.memory.ports import NewMemory, Scope

    texts = sentences(size, numbered=True)
    rng = np.random.default_rng(5)

    def memory(i: int) -> NewMemory:
        user = f"user-{i % 100}"
        vector = rng.standard_normal(384).astype(np.float32)
        vector /= np.linalg.norm(vector)
        return NewMemory(
            str(uuid.uuid4()),
            "default",
            Scope(MemoryLayer.USER, {"user_id": user}, user),
            texts[i],
            {"i": i, "tags": [f"t{i % 7}"], "score": i / 3},
            vector,
        )

    async def load(store: Any) -> None:
        async with store.bulk_loading():
            for lo in range(0, size, 5000):
                await store.bulk_add([memory(i) for i in range(lo, min(size, lo + 5000))])

    start = time.perf_counter()
    with open_lamina(kind, target) as ms:
        ms._run(load(ms.aio.store))
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


def run_store(kind: str, size: int, repeat: int, url: str) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"lamina-transfer-{kind}-"))

    def empty(name: str) -> str:
        if kind == "postgresql":
            reset_database(url)
            return url
        return str(work / name)

    try:
        return measure(kind, size, repeat, work, empty)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(kind: str, size: int, repeat: int, work: Path, empty: Any) -> dict[str, Any]:
    source = empty("source")
    fill_seconds = fill(kind, source, size)
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
    args = parser.parse_args()
    url = os.environ.get("LAMINA_BENCH_POSTGRES_URL", DEFAULT_URL)
    results = [run_store(kind, args.size, args.repeat, url) for kind in args.stores.split(",")]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "benchmark": "memory_transfer",
                "targets": {"export_per_s": 5000, "import_per_s": 3000},
                "results": results,
                "peak_rss_mb": round(peak),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
