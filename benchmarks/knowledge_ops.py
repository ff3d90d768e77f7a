"""The knowledge repository and the governance engine. Prints JSON.

- ``create``: ``ms.knowledge.create`` (validation, secret scan, embedding, one git commit,
  index update) in a repository that already holds ``--items`` items;
- ``rebuild``: a full index rebuild from git of ``--items`` items, cold (every text embedded)
  and warm (embeddings from the store's cache);
- ``search``: ``ms.knowledge.search`` over the items, never-seen queries (each embedded) and
  repeated ones (query vector cached), hybrid mode;
- ``validate``: ``ms.governance.validate`` with ``--policies`` accepted policies of
  ``--rules-per-policy`` rules (regexes, word uses, dependencies, imports, config) against a
  100 KB file with dependencies, imports and config.

The items are written as one commit through the git store (a bulk import), then indexed by
the rebuild; everything else goes through the library.

    uv run python -m benchmarks.knowledge_ops [--items 10000] [--creates 200] [--queries 200]
        [--policies 200] [--rules-per-policy 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from datetime import UTC, datetime
from typing import Any

from benchmarks.corpus import queries, sentences
from benchmarks.memory_ops import ms_stats, rss_mb
from lamina import AsyncLamina
from lamina.knowledge.document import item_path, render
from lamina.knowledge.models import KnowledgeItem, KnowledgeLayer, KnowledgeStatus, KnowledgeType

TYPES = list(KnowledgeType)
TEAMS = [f"team-{i}" for i in range(20)]


def bulk_items(count: int) -> list[KnowledgeItem]:
    texts = sentences(count, numbered=True)
    now = datetime.now(UTC).replace(microsecond=0)
    rng = random.Random(5)
    items = []
    for i, text in enumerate(texts):
        kind = TYPES[i % 3 if i % 3 != 1 else 2]  # adr, pattern, spec (policies come later)
        layer = KnowledgeLayer.TEAM if i % 4 else KnowledgeLayer.COMPANY
        layer_id = rng.choice(TEAMS) if layer is KnowledgeLayer.TEAM else None
        item_id = f"{kind.value}-b{i:06d}"
        items.append(
            KnowledgeItem(
                id=item_id,
                type=kind,
                layer=layer,
                layer_id=layer_id,
                title=text[:80],
                summary=text,
                body=f"## Context\n{text}\n\n## Decision\n{texts[(i * 7) % count]}\n",
                status=KnowledgeStatus.ACCEPTED,
                tags=[rng.choice(["db", "api", "ops", "security", "ui"])],
                created=now,
                updated=now,
                path=item_path(kind, layer, layer_id, item_id),
            )
        )
    return items


def policy_rules(p: int, n: int, rng: random.Random) -> list[dict[str, Any]]:
    rules = []
    words = ["eval", "exec", "pickle", "subprocess", "yaml.load", "md5", "sha1", "telnetlib"]
    for r in range(n):
        kind = r % 5
        rid = f"p{p}-r{r}"
        if kind == 0:
            rule = {
                "target": "code",
                "operator": "must_not_match",
                "value": rf"(?i)\bforbidden_{p}_{r}\s*\(",
            }
        elif kind == 1:
            rule = {
                "target": "code",
                "operator": "must_not_use",
                "value": rng.choice(words) + f"_{p}",
            }
        elif kind == 2:
            rule = {"target": "dependency", "operator": "must_not_use", "value": f"badpkg-{p}-{r}"}
        elif kind == 3:
            rule = {"target": "import", "operator": "must_not_use", "value": f"legacy{p}.mod{r}"}
        else:
            rule = {
                "target": "config",
                "operator": "must_not_match",
                "value": rf"^debug_{p}_{r}=True",
            }
        rules.append({"id": rid, "severity": rng.choice(["info", "warn", "block"]), **rule})
    return rules


def big_file(size: int) -> str:
    lines = []
    i = 0
    while sum(len(x) + 1 for x in lines) < size:
        lines.append(f"def handler_{i}(request):  # serve request {i}")
        lines.append(f"    value = compute(request.args['k{i}'], retries=3)")
        lines.append("    return respond(value)")
        i += 1
    return "\n".join(lines)[:size]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"items": args.items}
    with tempfile.TemporaryDirectory() as tmp:
        async with AsyncLamina(data_dir=tmp) as ms:
            ks = ms.knowledge
            items = bulk_items(args.items)
            start = time.perf_counter()
            files: dict[str, bytes | None] = {i.path: render(i) for i in items}
            head = ks.git.head("default")
            await asyncio.to_thread(
                ks.git.commit, "default", head, files, message="Bulk import", author="bench"
            )
            out["bulk_commit_s"] = round(time.perf_counter() - start, 2)

            start = time.perf_counter()
            result = await ks.rebuild()
            cold = time.perf_counter() - start
            start = time.perf_counter()
            await ks.rebuild()
            warm = time.perf_counter() - start
            out["rebuild"] = {
                "indexed": result["indexed"],
                "cold_s": round(cold, 2),
                "cold_items_per_s": round(args.items / cold),
                "warm_s": round(warm, 2),
                "warm_items_per_s": round(args.items / warm),
            }

            qs = queries(args.queries)
            await ks.search(qs[0])  # warm-up
            fresh = []
            for q in qs:
                t = time.perf_counter()
                await ks.search(q, status="any")
                fresh.append(time.perf_counter() - t)
            repeated = []
            for q in qs:
                t = time.perf_counter()
                await ks.search(q, status="any")
                repeated.append(time.perf_counter() - t)
            filtered = []
            for q in qs:
                t = time.perf_counter()
                await ks.search(q, type="adr", layer="team", layer_id="team-3")
                filtered.append(time.perf_counter() - t)
            out["search"] = {
                "new_query": ms_stats(fresh),
                "repeated_query": ms_stats(repeated),
                "filtered_repeated": ms_stats(filtered),
            }

            creates = []
            texts = sentences(args.creates, seed=11)
            for i, text in enumerate(texts):
                t = time.perf_counter()
                await ks.create(
                    "adr",
                    text[:80],
                    layer="team",
                    layer_id=TEAMS[i % len(TEAMS)],
                    summary=text,
                    body=f"## Decision\n{text}\n",
                    author="bench",
                )
                creates.append(time.perf_counter() - t)
            out["create_with_commit"] = ms_stats(creates)

            rng = random.Random(3)
            start = time.perf_counter()
            policy_files: dict[str, bytes | None] = {}
            now = datetime.now(UTC).replace(microsecond=0)
            for p in range(args.policies):
                layer = KnowledgeLayer.COMPANY if p % 2 else KnowledgeLayer.TEAM
                layer_id = None if layer is KnowledgeLayer.COMPANY else "team-1"
                item = KnowledgeItem(
                    id=f"pol-{p:04d}",
                    type=KnowledgeType.POLICY,
                    layer=layer,
                    layer_id=layer_id,
                    title=f"Policy {p}",
                    status=KnowledgeStatus.ACCEPTED,
                    created=now,
                    updated=now,
                    rules=policy_rules(p, args.rules_per_policy, rng),
                    path=item_path(KnowledgeType.POLICY, layer, layer_id, f"pol-{p:04d}"),
                )
                policy_files[item.path] = render(item)
            await asyncio.to_thread(
                ks.git.commit,
                "default",
                ks.git.head("default"),
                policy_files,
                message="Policies",
                author="bench",
            )
            out["policies_commit_and_index_s"] = round(time.perf_counter() - start, 2)
            ctx = {
                "path": "src/service/handlers.py",
                "content": big_file(100_000),
                "dependencies": [f"pkg{i}>=1.0" for i in range(60)],
                "imports": [f"mod{i}.sub" for i in range(60)],
                "config": {"server": {"port": 8080, "debug": False}, "db": {"pool": 10}},
            }
            first = await ms.governance.validate("team", ctx, "team-1")
            times = []
            for _ in range(args.validations):
                t = time.perf_counter()
                result_v = await ms.governance.validate("team", ctx, "team-1")
                times.append(time.perf_counter() - t)
            out["validate"] = {
                "policies": len(result_v.policies_applied),
                "rules_evaluated": first.rules_evaluated,
                "content_bytes": len(ctx["content"]),
                "violations": len(result_v.violations),
                **ms_stats(times),
            }
            out["rss_mb"] = round(rss_mb())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--creates", type=int, default=200)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--policies", type=int, default=200)
    parser.add_argument("--rules-per-policy", type=int, default=10)
    parser.add_argument("--validations", type=int, default=50)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args)), indent=2))


if __name__ == "__main__":
    main()
