"""The status of a knowledge item and its transitions: draft → proposed | rejected;
proposed → accepted | rejected; accepted → deprecated | superseded (naming the successor)."""

from __future__ import annotations

from typing import Any

from lamina.checks import check_choice, invalid
from lamina.errors import ErrorCode, LaminaError
from lamina.knowledge.document import check_id, render
from lamina.knowledge.fields import check_author, check_message
from lamina.knowledge.models import TRANSITIONS, KnowledgeChange, KnowledgeItem, KnowledgeStatus
from lamina.knowledge.repository import Repository
from lamina.knowledge.writes import Plan, Writer, now


def check_transition(item: KnowledgeItem, target: KnowledgeStatus) -> None:
    allowed = TRANSITIONS[item.status]
    if target not in allowed:
        raise LaminaError(
            ErrorCode.INVALID_TRANSITION,
            f"{item.id} is {item.status.value}; it can move to "
            + (", ".join(sorted(s.value for s in allowed)) or "nothing")
            + f", not {target.value}",
            details={
                "id": item.id,
                "from": item.status.value,
                "to": target.value,
                "allowed": sorted(s.value for s in allowed),
            },
        )


class Lifecycle:
    """``set_status``: one commit through the write path."""

    def __init__(self, repository: Repository, writer: Writer) -> None:
        self._repository = repository
        self._writer = writer

    async def set_status(
        self,
        id: str,
        status: str | KnowledgeStatus,
        *,
        superseded_by: str | None = None,
        author: str = "lamina",
        message: str | None = None,
        tenant_id: str | None = None,
    ) -> KnowledgeChange:
        """Move an item along its lifecycle: draft → proposed | rejected; proposed → accepted
        | rejected; accepted → deprecated | superseded (naming the successor). Anything else
        is INVALID_TRANSITION."""
        tenant = self._repository.tenant(tenant_id)
        item_id = check_id("id", id)
        target = check_choice("status", status, KnowledgeStatus)
        successor = None if superseded_by is None else check_id("superseded_by", superseded_by)
        if successor is not None and target is not KnowledgeStatus.SUPERSEDED:
            raise invalid("superseded_by goes with status superseded", "superseded_by")
        who = check_author(author)
        note = check_message(message)

        async def mutate(head: str | None) -> Plan:
            current = await self._repository.item_at(tenant, head, item_id)
            check_transition(current, target)
            update: dict[str, Any] = {"status": target, "updated": now()}
            files: dict[str, bytes | None] = {}
            items = []
            if successor is not None:
                if successor == item_id:
                    raise invalid("an item cannot supersede itself", "superseded_by")
                other = await self._repository.item_at(tenant, head, successor)
                update["superseded_by"] = successor
                if item_id not in other.supersedes:
                    other = other.model_copy(
                        update={"supersedes": [*other.supersedes, item_id], "updated": now()}
                    )
                    files[other.path] = render(other)
                    items.append(other)
            item = current.model_copy(update=update)
            files[item.path] = render(item)
            return Plan(
                files,
                note or f"{item.type.value} {item.id}: {current.status.value} → {target.value}",
                items=[item, *items],
            )

        plan, commit = await self._writer.commit_change(tenant, who, mutate)
        return KnowledgeChange(item=plan.items[0], commit=commit)
