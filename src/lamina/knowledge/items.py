"""Creating and changing knowledge items: each call checks its arguments, then commits the
item's file (one commit), governed by the write guard."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Unpack

from lamina.checks import check_choice, invalid
from lamina.errors import ErrorCode, LaminaError
from lamina.knowledge.document import check_id, check_layer, item_path, render
from lamina.knowledge.fields import (
    POLICY_FIELDS,
    ItemFields,
    check_author,
    check_item_fields,
    check_message,
    check_policy_fields,
    item_fields,
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
from lamina.knowledge.policy import Severity
from lamina.knowledge.repository import Repository
from lamina.knowledge.writes import Mutation, Plan, Writer, now


class ItemWrites:
    """``create`` and ``update``: the arguments checked, then one commit through the write
    path."""

    def __init__(self, repository: Repository, writer: Writer) -> None:
        self._repository = repository
        self._writer = writer

    async def create(
        self,
        type: str | KnowledgeType,
        title: str,
        *,
        layer: str | KnowledgeLayer,
        layer_id: str | None = None,
        id: str | None = None,
        status: str | KnowledgeStatus = KnowledgeStatus.DRAFT,
        supersedes: Sequence[str] | None = None,
        author: str = "lamina",
        message: str | None = None,
        tenant_id: str | None = None,
        **fields: Unpack[ItemFields],
    ) -> KnowledgeChange:
        """Add an item (one commit). ``id`` defaults to ``<type>-<n>``, the next free number.
        An item starts as draft (or proposed / accepted when review happened elsewhere).
        ``fields``: its content (lamina.knowledge.fields.ItemFields; severity info unless
        given)."""
        given = item_fields("create", fields)
        tenant = self._repository.tenant(tenant_id)
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
        content = {
            **check_item_fields(
                self._repository.max_content,
                title="" if title is None else title,
                summary=given["summary"] or "",
                body=given["body"] or "",
                severity=given["severity"] or Severity.INFO,
                tags=given["tags"] or [],
                constraints=given["constraints"] or [],
                authors=given["authors"] or [],
                related=given["related"] or [],
                supersedes=supersedes or [],
            ),
            **check_policy_fields(kind, *(given[name] for name in POLICY_FIELDS)),
        }
        content["authors"] = content["authors"] or [who]
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
            if await self._repository.index.lookup(tenant, item_id) is not None:
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
                **content,
            )
            message = note or f"Create {kind.value} {item_id}: {item.title}"
            return await self._item_plan(tenant, item, message, counters)

        return await self._commit_item(tenant, who, mutate)

    async def _next_number(self, tenant: str, kind: KnowledgeType) -> int:
        """The next free number for a generated ``<type>-<n>`` id (counted once, then kept
        in the index state)."""
        state = await self._repository.index.state(tenant) or {}
        last = state.get("counters", {}).get(kind.value)
        if last is None:
            tag = filter_tag(kind.value, None, None, None)
            last = (await self._repository.index.page(tenant, tag, 1, None))[2]
        n = int(last) + 1
        while await self._repository.index.lookup(tenant, f"{kind.value}-{n:04d}") is not None:
            n += 1
        return n

    async def update(
        self,
        id: str,
        *,
        title: str | None = None,
        author: str = "lamina",
        message: str | None = None,
        tenant_id: str | None = None,
        **fields: Unpack[ItemFields],
    ) -> KnowledgeChange:
        """Change an item's content (one commit); the fields not given (or None) stay.
        Status changes go through ``set_status``."""
        given = item_fields("update", fields)
        tenant = self._repository.tenant(tenant_id)
        item_id = check_id("id", id)
        who = check_author(author)
        patch = check_item_fields(
            self._repository.max_content,
            title=title,
            **{k: v for k, v in given.items() if k not in POLICY_FIELDS},
        )
        policy_patch = {k: given[k] for k in POLICY_FIELDS if given[k] is not None}
        if not patch and not policy_patch:
            raise invalid("nothing to update: give at least one field", "fields")
        note = check_message(message)

        async def mutate(head: str | None) -> Plan:
            current = await self._repository.item_at(tenant, head, item_id)
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
            message = note or f"Update {item.type.value} {item.id}"
            return await self._item_plan(tenant, item, message)

        return await self._commit_item(tenant, who, mutate)

    async def _item_plan(
        self, tenant: str, item: KnowledgeItem, message: str, counters: dict[str, int] | None = None
    ) -> Plan:
        """Writing ``item``'s file, governed (the write guard's violations go with it)."""
        violations = await self._writer.check_governance(tenant, item)
        return Plan(
            {item.path: render(item)},
            message,
            items=[item],
            violations=violations,
            counters=counters or {},
        )

    async def _commit_item(self, tenant: str, who: str, mutate: Mutation) -> KnowledgeChange:
        """Commit the plan of ``mutate`` (one item); the item, the commit and the violations."""
        plan, commit = await self._writer.commit_change(tenant, who, mutate)
        return KnowledgeChange(item=plan.items[0], commit=commit, violations=plan.violations)
