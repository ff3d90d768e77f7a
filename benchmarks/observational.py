"""Observational memory: the cost on the append path, and a LoCoMo replay. Prints JSON.

1. ``append``: appending a message with observational memory off and on (same store, same
   messages, alternating rounds; the observer is a deterministic in-process model, so no
   LLM latency is involved); p50 of each and the difference.
2. ``locomo``: every LoCoMo dev conversation (../shared/eval/locomo-dev.json) replayed as one
   long session, message by message, at the default thresholds, with a deterministic
   extractive observer and reflector (every 4th message's first words; first sentences).
   Reported: LLM calls per 1,000 messages, the tokens the prompt carries (Conversation
   Memory + the recent un-observed messages within their budget) against the raw history,
   and the largest Conversation Memory section seen against its budget (checked after
   every 10 messages).

    uv run python -m benchmarks.observational [--appends 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.memory_ops import ms_stats
from lamina import AsyncLamina
from lamina.config import Settings
from lamina.llm.base import ChatRequest, ChatResponse
from lamina.tokens import default_counter

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "eval" / "locomo-dev.json"


class ExtractiveModel:
    """A deterministic stand-in for the Observer and Reflector LLM."""

    model_id = "extractive"

    def __init__(self) -> None:
        self.calls = 0

    async def generate(self, request: ChatRequest) -> ChatResponse:
        self.calls += 1
        text = request.latest_user_message()
        if request.system.startswith("You condense"):
            firsts = [
                re.split(r"(?<=[.!?])\s", block.split("\n", 1)[-1])[0]
                for block in text.split("\n\n")
            ]
            out = " ".join(firsts)
            words = out.split()
            return ChatResponse(" ".join(words[:150]), self.model_id)
        lines = [ln for ln in text.splitlines() if ln.startswith("[")]
        picked = [" ".join(ln.split()[:14]) for ln in lines[::4]]
        return ChatResponse(" ".join(picked), self.model_id)

    async def aclose(self) -> None:
        return None


def settings(data_dir: str, enabled: bool) -> Settings:
    return Settings(
        data_dir=Path(data_dir),
        observational_memory={"enabled": enabled},  # type: ignore[arg-type]
    )


async def append_cost(count: int) -> dict[str, Any]:
    texts = [f"message {i}: the staging cluster shows replication lag again" for i in range(50)]
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        times: dict[bool, list[float]] = {False: [], True: []}
        stores = {}
        for enabled in (False, True):
            ms = AsyncLamina(settings(tmp, enabled), chat_model=ExtractiveModel())
            await ms.start()
            stores[enabled] = ms
            for i in range(20):  # warm up
                await ms.sessions.append(f"warm-{enabled}", "user", texts[i % 50])
        for round_ in range(count // 100):
            for enabled in (False, True):
                ms = stores[enabled]
                for i in range(50):
                    start = time.perf_counter()
                    await ms.sessions.append(f"s{round_ % 20}-{enabled}", "user", texts[i])
                    times[enabled].append(time.perf_counter() - start)
        for ms in stores.values():
            await ms.sessions.flush()
            await ms.close()
    off, on = ms_stats(times[False]), ms_stats(times[True])
    out["append_off"], out["append_on"] = off, on
    out["added_p50_ms"] = round(on["p50_ms"] - off["p50_ms"], 3)
    return out


async def locomo() -> dict[str, Any]:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    counter = default_counter()
    model = ExtractiveModel()
    totals = {"messages": 0, "raw_tokens": 0, "context_tokens": 0}
    worst_memory, budget = 0, 0
    per_conversation = []
    with tempfile.TemporaryDirectory() as tmp:
        ms = AsyncLamina(settings(tmp, True), chat_model=model)
        await ms.start()
        budget = ms.settings.observational_memory.memory_token_budget
        try:
            for sample in data:
                conv = sample["conversation"]
                key = f"locomo:{sample['sample_id']}"
                raw = 0
                names = sorted(
                    (k for k in conv if re.fullmatch(r"session_\d+", k)),
                    key=lambda k: int(k.split("_")[1]),
                )
                n = 0
                for name in names:
                    for turn in conv[name]:
                        role = "user" if turn["speaker"] == conv["speaker_a"] else "assistant"
                        text = turn["text"] or "(image)"
                        message = await ms.sessions.append(key, role, text)
                        raw += message.token_count + 4
                        n += 1
                        if n % 10 == 0:
                            await ms.sessions.flush()
                            prompt = await ms.context.build_prompt("", "x y", session_key=key)
                            worst_memory = max(worst_memory, counter.count(prompt))
                await ms.sessions.flush()
                prompt = await ms.context.build_prompt("", "x y", session_key=key)
                recent = await ms.sessions.recent_messages(key)
                context = counter.count(prompt) + sum(m.token_count + 4 for m in recent)
                view = await ms.sessions.show(key)
                per_conversation.append(
                    {
                        "session": key,
                        "messages": n,
                        "raw_history_tokens": raw,
                        "context_tokens": context,
                        "observations": len(view.observations),
                        "reflections": [r.generation for r in view.reflections],
                    }
                )
                totals["messages"] += n
                totals["raw_tokens"] += raw
                totals["context_tokens"] += context
        finally:
            await ms.close()
    return {
        "conversations": per_conversation,
        "llm_calls_per_1000_messages": round(model.calls * 1000 / totals["messages"], 1),
        "context_over_raw_history": round(totals["context_tokens"] / totals["raw_tokens"], 3),
        "largest_memory_section_tokens": worst_memory,
        "memory_token_budget": budget,
    }


async def main(args: argparse.Namespace) -> None:
    result = {"benchmark": "observational", **await append_cost(args.appends)}
    result["locomo"] = await locomo()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--appends", type=int, default=2000)
    asyncio.run(main(parser.parse_args()))
