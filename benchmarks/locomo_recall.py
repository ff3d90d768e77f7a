"""Retrieval quality on LoCoMo (../shared/eval/locomo-dev.json), as a new user would get it,
on the embedded store and, with ``--postgres URL``, on PostgreSQL in the same run, side by
side with their difference (the two must agree: docs/search.md).

Each conversation is ingested with ``memory.add_messages`` one session at a time (one
conversation id per session, the speakers' names, the session's date as every message's
timestamp, the turn's image caption appended as " [shares <caption>]"), all under one user.
Each question of categories 1-4 with evidence is searched with its text and default arguments
(``limit=20`` to measure @20). recall@k is the share of the question's evidence turns in the
top k, averaged over questions. Also printed:

- the same search at threshold 0 (calibration (a): default recall@10 within 0.02 of it),
- each question searched against the *other* conversation's user, where nothing relevant
  exists (calibration (b): the share of those searches that return nothing),
- keyword-only and semantic-only recall, and search latency;
- the default search's recall@10 by LoCoMo category and by conversation;
- ``search_p50_ms_every_default``: search with every argument its default (limit 10 too), in
  a new instance of the library on the same store, so that each query is embedded again;
- ``prompt``: recall inside the prompt. For each question, the prompt the context retriever
  assembles for it at the default token budget (``context.build_prompt`` with an empty base
  and the question's user): the share of the question's evidence turns whose text it holds
  (averaged over questions, as recall@k; the prompt collapses a memory's whitespace, so
  the text is looked for collapsed too), and the tokens it spends (``context.counter``).

The data is read from ../shared at run time and never copied into the project.

    uv run python -m benchmarks.locomo_recall [--data PATH] [--postgres URL]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.add_messages import locomo_sessions
from lamina import Lamina

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "eval" / "locomo-dev.json"
KS = (5, 10, 20)
#: LoCoMo's question categories.
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def questions(sample: dict[str, Any]) -> list[dict[str, Any]]:
    return [q for q in sample["qa"] if q.get("category") in (1, 2, 3, 4) and q.get("evidence")]


def evidence_of(qa: dict[str, Any]) -> set[str]:
    """The dialogue ids of a question's evidence turns. One entry of the file names two turns
    in one string ("D8:6; D9:17"): read as the two, it can be found like any other."""
    return {part.strip() for entry in qa["evidence"] for part in entry.split(";") if part.strip()}


def one_line(text: str) -> str:
    return " ".join(text.split())


def recall(ranked: list[str], evidence: set[str]) -> dict[int, float]:
    return {k: len(evidence & set(ranked[:k])) / len(evidence) for k in KS}


def measure(path: Path, database_url: str | None) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    runs: dict[str, dict[str, Any]] = {
        "default": {},
        "threshold_0": {"threshold": 0.0},
        "keyword": {"mode": "keyword", "threshold": 0.0},
        "semantic": {"mode": "semantic", "threshold": 0.0},
    }
    totals = {name: dict.fromkeys(KS, 0.0) for name in runs}
    latencies: dict[str, list[float]] = {name: [] for name in runs}
    count = empty_elsewhere = messages = 0
    # recall@10 of the default search by LoCoMo category and by conversation.
    groups: dict[str, list[float]] = {}
    below_when_empty: list[int] = []
    ingest_seconds = 0.0
    in_prompt = 0.0
    prompt_tokens: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        options: dict[str, Any] = {"data_dir": tmp}
        if database_url:  # a tenant of its own: earlier runs' rows stay out of the way
            options["database_url"] = database_url
            options["tenant_id"] = f"locomo-{uuid.uuid4().hex[:12]}"
        with Lamina(**options) as ms:
            dia_of: dict[str, str] = {}
            text_of: dict[tuple[str, str], str] = {}  # (user, dialogue id) -> stored text
            numbers: dict[str, int] = {}
            for user, batch in locomo_sessions(path):
                numbers[user] = numbers.get(user, 0) + 1
                start = time.perf_counter()
                added = ms.memory.add_messages(
                    batch, user_id=user, conversation_id=f"{user}-session-{numbers[user]}"
                )
                ingest_seconds += time.perf_counter() - start
                messages += len(batch)
                for entry in added.memories:
                    dia_of[entry.id] = entry.metadata["dia_id"]
                    text_of[user, entry.metadata["dia_id"]] = entry.content
            users = [sample["sample_id"] for sample in data]
            for index, sample in enumerate(data):
                user = sample["sample_id"]
                other = users[(index + 1) % len(users)]
                for qa in questions(sample):
                    count += 1
                    evidence = evidence_of(qa)
                    for name, extra in runs.items():
                        start = time.perf_counter()
                        hits = ms.memory.search(qa["question"], user_id=user, limit=20, **extra)
                        latencies[name].append(time.perf_counter() - start)
                        got = recall([dia_of[h.memory.id] for h in hits], evidence)
                        for k in KS:
                            totals[name][k] += got[k]
                        if name == "default":
                            category = CATEGORIES.get(qa["category"], str(qa["category"]))
                            for group in (f"category {category}", f"conversation {user}"):
                                groups.setdefault(group, []).append(got[10])
                    prompt = ms.context.build_prompt(
                        "", qa["question"], identifiers={"user_id": user}
                    )
                    prompt_tokens.append(ms.context.counter.count(prompt))
                    # The prompt shows each memory on one line, its whitespace collapsed.
                    held = [d for d in evidence if one_line(text_of.get((user, d), "\0")) in prompt]
                    in_prompt += len(held) / len(evidence)
                    elsewhere = ms.memory.search(qa["question"], user_id=other, limit=20)
                    if not elsewhere:
                        empty_elsewhere += 1
                        below_when_empty.append(elsewhere.below_threshold)
        # Every argument its default (the limit too, 10), in a new instance: each query is
        # embedded again, as a new user's first search of it would be.
        plain: list[float] = []
        with Lamina(**options) as ms:
            for sample in data:
                for qa in questions(sample):
                    start = time.perf_counter()
                    ms.memory.search(qa["question"], user_id=sample["sample_id"])
                    plain.append(time.perf_counter() - start)
    result: dict[str, Any] = {
        "questions": count,
        "messages": messages,
        "add_messages_per_s": round(messages / ingest_seconds, 1),
    }
    for name in runs:
        result[name] = {
            **{f"recall@{k}": round(totals[name][k] / count, 3) for k in KS},
            "search_p50_ms": round(statistics.median(latencies[name]) * 1000, 2),
        }
    result["default_recall@10_by"] = {
        group: {"questions": len(values), "recall@10": round(sum(values) / len(values), 3)}
        for group, values in sorted(groups.items())
    }
    result["search_p50_ms_every_default"] = round(statistics.median(plain) * 1000, 2)
    result["prompt"] = {
        "evidence_share": round(in_prompt / count, 3),
        "tokens_mean": round(statistics.mean(prompt_tokens), 1),
        "tokens_p50": statistics.median(prompt_tokens),
    }
    result["calibration"] = {
        "recall@10_default_minus_threshold_0": round(
            (totals["default"][10] - totals["threshold_0"][10]) / count, 3
        ),
        "other_user_empty_share": round(empty_elsewhere / count, 3),
        "other_user_empty_below_threshold_median": (
            statistics.median(below_when_empty) if below_when_empty else None
        ),
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--postgres", default=None, help="Also measure on this PostgreSQL.")
    args = parser.parse_args()
    if not args.data.is_file():
        sys.exit(f"evaluation data not found: {args.data}")
    result: dict[str, Any] = {"benchmark": "locomo_recall", "sqlite": measure(args.data, None)}
    if args.postgres:
        result["postgresql"] = measure(args.data, args.postgres)
        result["difference_postgresql_minus_sqlite"] = {
            run: {
                key: round(result["postgresql"][run][key] - result["sqlite"][run][key], 3)
                for key in result["sqlite"][run]
            }
            for run in ("default", "threshold_0", "keyword", "semantic")
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
