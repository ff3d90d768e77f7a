"""How every knowledge change is written: a mutation plans the files of one commit on the
current head, under the tenant's write lock (in the process and across processes), and the
index follows the commit before the lock is released."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lamina.knowledge.document import MANIFEST, dump_yaml
from lamina.knowledge.models import KnowledgeItem, KnowledgeLayer
from lamina.knowledge.policy import Violation
from lamina.knowledge.repository import Repository


@dataclass(frozen=True)
class GuardedWrite:
    """Content about to enter a shared layer: where it goes, its text, and ``extra``: other
    fields scanned for secrets (tags, related)."""

    tenant: str
    layer: KnowledgeLayer
    layer_id: str | None
    path: str
    content: str
    extra: Mapping[str, Any] | None = None


#: Checks a write: raises POLICY_VIOLATION on a block and returns the violations that do not
#: block.
WriteGuard = Callable[[GuardedWrite], Awaitable[list[Violation]]]


#: Refuses (POLICY_VIOLATION) a secret in any text of the named fields (a commit message).
SecretGuard = Callable[[Mapping[str, Any]], Awaitable[None]]


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


@dataclass
class Plan:
    """What one write commits: files (None deletes), the message, and what to return."""

    files: dict[str, bytes | None]
    message: str
    items: list[KnowledgeItem] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    result: Any = None
    #: Generated ids: the last number used per type.
    counters: dict[str, int] = field(default_factory=dict)


Mutation = Callable[[str | None], Awaitable[Plan]]


class Writer:
    """The write path of the repository: one commit per change, governed by the guards the
    runtime sets (``ms.knowledge.guard``, ``ms.knowledge.secret_guard``)."""

    def __init__(self, repository: Repository) -> None:
        self.repository = repository
        #: Governance of writes (secrets, policies); None: every write passes.
        self.guard: WriteGuard | None = None
        #: The secret scan of what is not an item's content (commit messages).
        self.secret_guard: SecretGuard | None = None

    async def commit_change(self, tenant: str, author: str, mutate: Mutation) -> tuple[Plan, str]:
        """Run ``mutate`` on the current head under the tenant's write lock and commit its
        plan; the index follows the commit before the lock is released."""
        repo = self.repository
        await repo.ready()
        async with repo.lock(tenant):
            handle = await asyncio.to_thread(repo.git.acquire, tenant)
            try:
                head = await repo.catch_up(tenant)
                plan = await mutate(head)
                if self.secret_guard is not None:
                    await self.secret_guard({"message": plan.message})
                files = dict(plan.files)
                if head is None:
                    files[MANIFEST] = self._manifest(tenant)
                commit = await asyncio.to_thread(
                    repo.git.commit, tenant, head, files, message=plan.message, author=author
                )
                plan.items = await self._index(tenant, commit, plan, files)
                return plan, commit
            finally:
                await asyncio.to_thread(repo.git.release, handle)

    async def _index(
        self, tenant: str, commit: str, plan: Plan, files: Mapping[str, bytes | None]
    ) -> list[KnowledgeItem]:
        """The index brought to ``commit``: the plan's items (stamped with it, returned)
        and removals, the state (policies, id counters)."""
        index = self.repository.index
        for item_id in plan.removed:
            await index.remove(tenant, item_id)
        stamped = [i.model_copy(update={"commit": commit}) for i in plan.items]
        await index.put(tenant, stamped)
        state = dict(await index.state(tenant) or {})
        state["commit"] = commit
        if any("/policies/" in p for p in files):
            state["policies"] = commit
        if plan.counters:
            state["counters"] = {**state.get("counters", {}), **plan.counters}
        await index.set_state(tenant, state)
        self.repository.mark_synced(tenant, commit)
        return stamped

    @staticmethod
    def _manifest(tenant: str) -> bytes:
        """The repository's self-description, written with its first commit."""
        return dump_yaml(
            {
                "format": 1,
                "kind": "lamina-knowledge",
                "tenant": tenant,
                "layers": {
                    "company": "company/",
                    "org": "orgs/<org_id>/",
                    "team": "teams/<team_id>/",
                    "project": "projects/<project_id>/",
                },
                "types": {
                    "adr": "adrs/",
                    "policy": "policies/",
                    "pattern": "patterns/",
                    "spec": "specs/",
                },
                "item": "<layer dir>/<type dir>/<id>.md: Markdown with YAML front matter",
                "promotions": "promotions/<id>.yaml",
            }
        )

    async def check_governance(self, tenant: str, item: KnowledgeItem) -> list[Violation]:
        """Governance of an item about to be written: raises POLICY_VIOLATION on a block and
        returns the violations that do not block (none without a guard)."""
        if self.guard is None:
            return []
        text = "\n".join([item.title, item.summary, *item.constraints, item.body])
        extra = {"tags": item.tags, "related": item.related}
        return await self.guard(
            GuardedWrite(tenant, item.layer, item.layer_id, item.path, text, extra)
        )
