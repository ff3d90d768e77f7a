"""Conversation ingestion with ``memory.add_messages`` on the embedded store (SQLite file +
local model), embedding included: messages per second. Prints JSON.

    uv run python -m benchmarks.add_messages [--messages 3000] [--locomo PATH]

Two runs on fresh stores: ``synthetic``, the benchmark corpus as conversations of 30 turns
added one call each; ``locomo``, the LoCoMo dev conversations (../shared/eval/locomo-dev.json
when present) added one session per call, as the issue's evaluation protocol does. For scale,
``*_embed_only`` is the local model alone on the same texts (the ceiling);
``add_one_by_one`` stores the first 300 synthetic messages with one ``add`` call each.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.corpus import sentences

DEFAULT_LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "eval" / "locomo-dev.json"
_DATE = re.compile(r"(\d{1,2}):(\d{2}) (am|pm) on (\d{1,2}) (\w+), (\d{4})")


def session_time(text: str) -> str:
    """LoCoMo's "1:56 pm on 8 May, 2023" as 2023-05-08T13:56:00."""
    found = _DATE.search(text)
    if found is None:
        return datetime(2023, 1, 1).isoformat()
    hour, minute, half, day, month, year = found.groups()
    h = int(hour) % 12 + (12 if half == "pm" else 0)
    stamp = f"{day} {month} {year} {h}:{minute}"
    return datetime.strptime(stamp, "%d %B %Y %H:%M").isoformat()


def locomo_sessions(path: Path) -> list[tuple[str, list[dict[str, Any]]]]:
    """(sample id, messages) per session, in session order."""
    out = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conv = sample["conversation"]
        n = 1
        while f"session_{n}" in conv:
            when = session_time(conv.get(f"session_{n}_date_time", ""))
            messages = []
            for turn in conv[f"session_{n}"]:
                text = turn["text"]
                if turn.get("blip_caption"):
                    text += f" [shares {turn['blip_caption']}]"
                messages.append(
                    {
                        "role": "user",
                        "name": turn["speaker"],
                        "content": text,
                        "timestamp": when,
                        "metadata": {"dia_id": turn["dia_id"]},
                    }
                )
            out.append((sample["sample_id"], messages))
            n += 1
    return out


def ingest(calls: list[tuple[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    from lamina import Lamina

    with tempfile.TemporaryDirectory() as tmp, Lamina(data_dir=tmp) as ms:
        ms.memory.add("warm up the model and the store", layer="user", user_id="warm")
        total = sum(len(m) for _, m in calls)
        start = time.perf_counter()
        for cid, messages in calls:
            ms.memory.add_messages(messages, user_id=cid, conversation_id=cid)
        elapsed = time.perf_counter() - start
    return {
        "calls": len(calls),
        "messages": total,
        "seconds": round(elapsed, 2),
        "messages_per_s": round(total / elapsed, 1),
    }


def embed_only(calls: list[tuple[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    """The local model alone on the same texts, batched per call: the ceiling."""
    from lamina.embeddings.local import LocalEmbedder

    embedder = LocalEmbedder()
    embedder.embed_sync(["warm up"])
    total = sum(len(m) for _, m in calls)
    start = time.perf_counter()
    for _, messages in calls:
        embedder.embed_sync([m["content"] for m in messages])
    return {"messages_per_s": round(total / (time.perf_counter() - start), 1)}


def one_by_one(texts: list[str]) -> dict[str, Any]:
    from lamina import Lamina

    with tempfile.TemporaryDirectory() as tmp, Lamina(data_dir=tmp) as ms:
        ms.memory.add("warm up the model and the store", layer="user", user_id="warm")
        start = time.perf_counter()
        for text in texts:
            ms.memory.add(text, layer="user", user_id="u")
        elapsed = time.perf_counter() - start
    return {"messages": len(texts), "messages_per_s": round(len(texts) / elapsed, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    args = parser.parse_args()
    texts = sentences(args.messages)
    synthetic = [
        (
            f"conv-{i // 30 // 20}",
            [
                {"role": "user" if j % 2 == 0 else "assistant", "content": t}
                for j, t in enumerate(texts[i : i + 30])
            ],
        )
        for i in range(0, len(texts), 30)
    ]
    report: dict[str, Any] = {
        "synthetic": ingest(synthetic),
        "synthetic_embed_only": embed_only(synthetic),
    }
    if args.locomo.is_file():
        sessions = locomo_sessions(args.locomo)
        report["locomo"] = ingest(sessions)
        report["locomo_embed_only"] = embed_only(sessions)
    report["add_one_by_one"] = one_by_one(texts[:300])
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
