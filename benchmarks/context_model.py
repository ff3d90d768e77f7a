"""What the context-aware model adds to a call, as a session grows. Prints JSON.

For sessions of each length (observational memory off: every message un-observed), the
median and p95 milliseconds of ``ContextAwareModel.prepare`` — read the session's recent
messages, append the new one, cut to max_message_token_budget, build the prompt (runtime
context, knowledge, memories, conversation memory) — with no model call (the wrapped model
points at nothing and is never called). Flat figures mean the cost does not grow with the
session.

    uv run python -m benchmarks.context_model [--lengths 100,1000,10000] [--calls 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time

from lamina import AsyncLamina
from lamina.config import LLMSettings
from lamina.context.providers import session_scope
from lamina.llm import build_chat_model, request

LINE = "message {i}: the staging cluster shows replication lag after the nightly deploy"


async def run(lengths: list[int], calls: int) -> dict[str, object]:
    out: dict[str, object] = {"calls_per_length": calls, "sessions": {}}
    with tempfile.TemporaryDirectory() as data:
        async with AsyncLamina(data_dir=data) as ms:
            await ms.context.knowledge.save("db", "Staging runs PostgreSQL 16")
            unused = build_chat_model(LLMSettings(model="none", base_url="http://127.0.0.1:9/v1"))
            model = ms.context_model(unused)
            for length in lengths:
                key = f"bench:{length}"
                for start in range(0, length, 1000):
                    batch = [
                        {"role": "user" if i % 2 == 0 else "assistant", "content": LINE.format(i=i)}
                        for i in range(start, min(length, start + 1000))
                    ]
                    await ms.sessions.append_many(key, batch)
                times = []
                sent = 0
                with session_scope(key, user_id="alice"):
                    for n in range(calls):
                        began = time.perf_counter()
                        prepared = await model.prepare(request(("user", f"why {n}?")))
                        times.append((time.perf_counter() - began) * 1000)
                        sent = len(prepared.messages)
                times.sort()
                out["sessions"][str(length)] = {  # type: ignore[index]
                    "median_ms": round(statistics.median(times), 2),
                    "p95_ms": round(times[int(len(times) * 0.95) - 1], 2),
                    "messages_sent": sent,
                }
            await model.aclose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", default="100,1000,10000")
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]
    print(json.dumps(asyncio.run(run(lengths, args.calls)), indent=2))


if __name__ == "__main__":
    main()
