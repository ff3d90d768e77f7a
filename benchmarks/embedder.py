"""Local embedder: load time (fresh process) and throughput at batch 64. Prints JSON.

uv run python benchmarks/embedder.py [--texts 1280] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from benchmarks.corpus import sentences

LOAD = (
    "import time; t0 = time.perf_counter();"
    "from lamina.embeddings.local import load_model; t1 = time.perf_counter();"
    "load_model(); t2 = time.perf_counter();"
    "print(t1 - t0, t2 - t1)"
)


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--texts", type=int, default=1280)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    timings = [
        [
            float(x)
            for x in subprocess.run(
                [sys.executable, "-c", LOAD], capture_output=True, text=True, check=True
            ).stdout.split()
        ]
        for _ in range(args.runs)
    ]
    imports = [t[0] for t in timings]
    loads = [t[1] for t in timings]
    from lamina.embeddings.local import LocalEmbedder, load_model

    load_model()
    embedder = LocalEmbedder(batch_size=64)
    texts = sentences(args.texts)
    tokens = [len(e.ids) for e in load_model().tokenizer.encode_batch(texts)]
    embedder.embed_sync(texts[:64])  # warm-up
    rates = []
    for _ in range(args.runs):
        start = time.perf_counter()
        embedder.embed_sync(texts)
        rates.append(len(texts) / (time.perf_counter() - start))
    singles = []
    for text in texts[:200]:
        start = time.perf_counter()
        embedder.embed_sync([text])
        singles.append(time.perf_counter() - start)
    print(
        json.dumps(
            {
                "benchmark": "local_embedder",
                "model": "all-MiniLM-L6-v2-int8 (onnxruntime)",
                "load_seconds_median": round(statistics.median(loads), 3),
                "load_seconds_all": [round(x, 3) for x in loads],
                "import_lamina_seconds_median": round(statistics.median(imports), 3),
                "batch": 64,
                "sentences_per_second_median": round(statistics.median(rates), 1),
                "single_sentence_ms_p50": round(statistics.median(singles) * 1000, 2),
                "texts": args.texts,
                "mean_tokens_per_text": round(statistics.mean(tokens), 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
