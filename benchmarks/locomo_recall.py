"""Retrieval quality on LoCoMo (../shared/eval/locomo-dev.json): recall@5/10/20 per mode.

Every dialogue turn is one memory ("Speaker: text" plus " [shares <caption>]"), all turns of a
conversation under one user; each question of categories 1-4 with evidence is searched with
its text; recall@k is the share of its evidence turns in the top k, averaged over questions.
The data is read from ../shared at run time and never copied into the project.

    uv run python benchmarks/locomo_recall.py [--data PATH] [--modes keyword,semantic,hybrid]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lamina import Lamina

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "eval" / "locomo-dev.json"
KS = (5, 10, 20)


def turns(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    sessions = sorted(
        (int(m.group(1)), key) for key in conversation if (m := re.fullmatch(r"session_(\d+)", key))
    )
    for number, key in sessions:
        date = conversation.get(f"session_{number}_date_time", "")
        for turn in conversation[key]:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            out.append({"text": text, "dia_id": turn["dia_id"], "session": number, "date": date})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--modes", default="keyword,semantic,hybrid")
    args = parser.parse_args()
    if not args.data.is_file():
        sys.exit(f"evaluation data not found: {args.data}")
    data = json.loads(args.data.read_text(encoding="utf-8"))
    modes = args.modes.split(",")
    totals = {mode: {k: 0.0 for k in KS} for mode in modes}
    latencies: dict[str, list[float]] = {mode: [] for mode in modes}
    questions = 0
    with tempfile.TemporaryDirectory() as tmp, Lamina(data_dir=tmp) as ms:
        for sample in data:
            user = sample["sample_id"]
            items = turns(sample["conversation"])
            entries = ms.memory.bulk_add(
                [
                    {
                        "content": t["text"],
                        "layer": "user",
                        "user_id": user,
                        "metadata": {
                            "dia_id": t["dia_id"],
                            "session": t["session"],
                            "date": t["date"],
                        },
                    }
                    for t in items
                ]
            )
            dia_of = {e.id: e.metadata["dia_id"] for e in entries}
            for qa in sample["qa"]:
                if qa.get("category") not in (1, 2, 3, 4) or not qa.get("evidence"):
                    continue
                evidence = set(qa["evidence"])
                questions += 1
                for mode in modes:
                    start = time.perf_counter()
                    hits = ms.memory.search(
                        qa["question"],
                        user_id=user,
                        mode=mode,
                        limit=max(KS),
                        threshold=None if mode == "keyword" else 0.0,
                    )
                    latencies[mode].append(time.perf_counter() - start)
                    ranked = [dia_of[h.memory.id] for h in hits]
                    for k in KS:
                        totals[mode][k] += len(evidence & set(ranked[:k])) / len(evidence)
    result: dict[str, Any] = {"benchmark": "locomo_recall", "questions": questions, "modes": {}}
    for mode in modes:
        lat = sorted(latencies[mode])
        result["modes"][mode] = {
            **{f"recall@{k}": round(totals[mode][k] / questions, 3) for k in KS},
            "search_p50_ms": round(lat[len(lat) // 2] * 1000, 2),
        }
    result["bm25_baseline_recall@10"] = 0.530
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
