"""Creating and changing knowledge items: each call checks its arguments, then commits the
item's file (one commit), governed by the write guard."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lamina.checks import check_choice, invalid
from lamina.errors import ErrorCode, LaminaError
from lamina.knowledge.document import check_id, check_layer, item_path, render
from lamina.knowledge.fields import (
    check_author,
    check_item_fields,
    check_message,
    check_policy_fields,
)
from lamina.knowledge.index import filter_tag
from lamina.knowledge.models import (
    INITIAL_STATUSES,
    KnowledgeChange,
    KnowledgeItem,
    KnowledgeLayer,
    KnowledgeStatus,
    KnowledgeType,
)
from lamina.knowledge.policy import MergeStrategy, PolicyMode, Severity
from lamina.knowledge.writes import Plan, Writer, now


class ItemWrites(Writer):
    """``create`` and ``update``."""

    async def create(
        self,
        type: str | KnowledgeType,
        title: str,
        *,
        layer: str | KnowledgeLayer,
        layer_id: str | None = None,
        id: str | None = None,
        summary: str | None = None,
        body: str | None = None,
        status: str | KnowledgeStatus = KnowledgeStatus.DRAFT,
        severity: str | Severity = Severity.INFO,
        tags: Sequence[str] | None = None,
        constraints: Sequence[str] | None = None,
        authors: Sequence[str] | None = None,
        related: Sequence[str] | None = None,
        supersedes: Sequence[str] | None = None,
        policy_id: str | None = None,
        mode: str | PolicyMode | None = None,
        merge_strategy: str | MergeStrategy | None = None,
        rules: Sequence[Any] | None = None,
        author: str = "lamina",
        message: str | None = None,
        tenant_id: str | None = None,
    ) -> KnowledgeChange:
        """Add an item (one commit). ``id`` defaults to ``<type>-<n>``, the next free number.
        An item starts as draft (or proposed / accepted when review happened elsewhere)."""
        tenant = self.tenant(tenant_id)
        kind = check_choice("type", type, KnowledgeType)
        where, where_id = check_layer(layer, layer_id)
        start = check_choice("status", status, KnowledgeStatus)
        if start not in INITIAL_STATUSES:
            raise LaminaError(
                ErrorCode.INVALID_TRANSITION,
                f"an item starts as draft, proposed or accepted, not {start.value}",
                details={"status": start.value},
            )
        who = check_author(author)
        stamp = now()
        fields = {
            **check_item_fields(
                self._max_content,
                title="" if title is None else title,
                summary=summary or "",
                body=body or "",
                severity=severity,
                tags=tags or [],
                constraints=constraints or [],
                authors=authors or [],
                related=related or [],
                supersedes=supersedes or [],
            ),
            **check_policy_fields(kind, policy_id, mode, merge_strategy, rules),
        }
        fields["authors"] = fields["authors"] or [who]
        wanted = None if id is None else check_id("id", id)
        note = check_message(message)

        async def mutate(head: str | None) -> Plan:
            counters: dict[str, int] = {}
            if wanted:
                item_id = wanted
            else:
                number = await self._next_number(tenant, kind)
                item_id = f"{kind.value}-{number:04d}"
                counters[kind.value] = number
            if await self.index.lookup(tenant, item_id) is not None:
                raise LaminaError(
                    ErrorCode.ITEM_EXISTS,
                    f"knowledge item {item_id!r} already exists in tenant {tenant!r}",
                    details={"id": item_id},
                )
            item = KnowledgeItem(
                id=item_id,
                type=kind,
                layer=where,
                layer_id=where_id,
                status=start,
                created=stamp,
                updated=stamp,
                path=item_path(kind, where, where_id, item_id),
                **fields,
            )
            violations = await self._check(tenant, item)
            return Plan(
                {item.path: render(item)},
                note or f"Create {kind.value} {item_id}: {item.title}",
                items=[item],
                violations=violations,
                counters=counters,
            )

        plan, commit = await self._write(tenant, who, mutate)
        return KnowledgeChange(item=plan.items[0], commit=commit, violations=plan.violations)

    async def _next_number(self, tenant: str, kind: KnowledgeType) -> int:
        """The next free number for a generated ``<type>-<n>`` id (counted once, then kept
        in the index state)."""
        state = await self.index.state(tenant) or {}
        last = state.get("counters", {}).get(kind.value)
        if last is None:
            tag = filter_tag(kind.value, None, None, None)
            last = (await self.index.page(tenant, tag, 1, None))[2]
        n = int(last) + 1
        while await self.index.lookup(tenant, f"{kind.value}-{n:04d}") is not None:
            n += 1
        return n

    async def update(
        self,
        id: str,
        *,
        title: str | None = None,
        summary: str | None = None,
        body: str | None = None,
        severity: str | Severity | None = None,
        tags: Sequence[str] | None = None,
        constraints: Sequence[str] | None = None,
        authors: Sequence[str] | None = None,
        related: Sequence[str] | None = None,
        policy_id: str | None = None,
        mode: str | PolicyMode | None = None,
        merge_strategy: str | MergeStrategy | None = None,
        rules: Sequence[Any] | None = None,
        author: str = "lamina",
        message: str | None = None,
        tenant_id: str | None = None,
    ) -> KnowledgeChange:
        """Change an item's content (one commit); the fields not given stay. Status changes
        go through ``set_status``."""
        tenant = self.tenant(tenant_id)
        item_id = check_id("id", id)
        who = check_author(author)
        patch = check_item_fields(
            self._max_content,
            title=title,
            summary=summary,
            body=body,
            severity=severity,
            tags=tags,
            constraints=constraints,
            authors=authors,
            related=related,
        )
        policy_patch = {
            k: v
            for k, v in (
                ("policy_id", policy_id),
                ("mode", mode),
                ("merge_strategy", merge_strategy),
                ("rules", rules),
            )
            if v is not None
        }
        if not patch and not policy_patch:
            raise invalid("nothing to update: give at least one field", "fields")
        note = check_message(message)

        async def mutate(head: str | None) -> Plan:
            current = await self._current(tenant, head, item_id)
            changes = dict(patch)
            if policy_patch:
                if current.type is not KnowledgeType.POLICY:
                    raise invalid("mode, merge_strategy and rules belong to policies only", "type")
                changes.update(
                    check_policy_fields(
                        current.type,
                        policy_patch.get("policy_id", current.policy_id),
                        policy_patch.get("mode", current.mode),
                        policy_patch.get("merge_strategy", current.merge_strategy),
                        policy_patch.get("rules", current.rules),
                    )
                )
            if who not in current.authors and "authors" not in patch:
                changes["authors"] = [*current.authors, who]
            item = current.model_copy(update={**changes, "updated": now()})
            item = KnowledgeItem.model_validate(item.model_dump())
            violations = await self._check(tenant, item)
            return Plan(
                {item.path: render(item)},
                note or f"Update {item.type.value} {item.id}",
                items=[item],
                violations=violations,
            )

        plan, commit = await self._write(tenant, who, mutate)
        return KnowledgeChange(item=plan.items[0], commit=commit, violations=plan.violations)
