"""Promotion: a request that an accepted item move to a strictly higher layer, and the
decisions on it (approve as replacement, specialization, applicability, exception or
clarification; reject; needs refinement; retarget). Requests live in the repository under
``promotions/``; every request and decision is one commit."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from lamina.checks import check_choice, check_text, first_error, invalid
from lamina.errors import ErrorCode, LaminaError
from lamina.knowledge.document import (
    FrontMatterError,
    check_id,
    check_layer,
    dump_yaml,
    item_path,
    load_yaml,
    promotion_path,
    render,
)
from lamina.knowledge.fields import MAX_MESSAGE, check_author
from lamina.knowledge.models import (
    LAYER_RANK,
    ApprovalKind,
    KnowledgeItem,
    KnowledgeLayer,
    KnowledgeStatus,
    Promotion,
    PromotionDecision,
    PromotionEvent,
    PromotionStatus,
)
from lamina.knowledge.repository import Repository
from lamina.knowledge.writes import Mutation, Plan, Writer, now

OPEN = (PromotionStatus.PENDING, PromotionStatus.NEEDS_REFINEMENT)


def _check_higher(item: KnowledgeItem, layer: KnowledgeLayer, layer_id: str | None) -> None:
    if LAYER_RANK[layer] <= LAYER_RANK[item.layer]:
        raise LaminaError(
            ErrorCode.INVALID_LAYER,
            f"{item.id} is at the {item.layer.value} layer; a promotion goes to a strictly "
            f"higher layer, not {layer.value}",
            details={"from": item.layer.value, "to": layer.value},
        )


def _check_decision(
    verdict: PromotionDecision,
    kind: ApprovalKind | None,
    target_layer: str | KnowledgeLayer | None,
    target_layer_id: str | None,
    new_id: str | None,
) -> tuple[KnowledgeLayer, str | None] | None:
    """Refuse arguments that do not go with the decision; the new target of a retarget."""
    if verdict is PromotionDecision.APPROVE and kind is None:
        raise invalid(
            "approve needs approval: one of " + ", ".join(a.value for a in ApprovalKind),
            "approval",
        )
    if verdict is not PromotionDecision.APPROVE and (kind is not None or new_id):
        raise invalid("approval and new_id go with the approve decision", "approval")
    if verdict is PromotionDecision.RETARGET:
        if target_layer is None:
            raise invalid("retarget needs target_layer", "target_layer")
        return check_layer(target_layer, target_layer_id)
    if target_layer is not None:
        raise invalid("target_layer goes with the retarget decision", "target_layer")
    return None


@dataclass
class _Decision:
    """What deciding a request changes: the request's fields, its new event, and for an
    approval the files, items and commit message of the promoted item."""

    promotion: Promotion
    verdict: PromotionDecision
    author: str
    reason: str | None
    stamp: datetime = field(default_factory=now)
    update: dict[str, Any] = field(default_factory=dict)
    event: dict[str, Any] = field(default_factory=dict)
    files: dict[str, bytes | None] = field(default_factory=dict)
    items: list[KnowledgeItem] = field(default_factory=list)
    message: str = ""

    def __post_init__(self) -> None:
        self.update["updated"] = self.stamp
        self.event.update(
            decision=self.verdict.value, author=self.author, at=self.stamp, reason=self.reason
        )
        self.message = f"Promotion {self.promotion.id}: {self.verdict.value}"


def _promoted(
    original: KnowledgeItem,
    promotion: Promotion,
    kind: ApprovalKind,
    promoted_id: str,
    stamp: datetime,
) -> KnowledgeItem:
    """The original's copy at the promotion's target layer, accepted."""
    return original.model_copy(
        update={
            "id": promoted_id,
            "layer": promotion.target_layer,
            "layer_id": promotion.target_layer_id,
            "status": KnowledgeStatus.ACCEPTED,
            "created": stamp,
            "updated": stamp,
            "related": list(dict.fromkeys([*original.related, original.id])),
            "supersedes": [original.id]
            if kind is ApprovalKind.REPLACEMENT
            else original.supersedes,
            "superseded_by": None,
            "path": item_path(
                original.type, promotion.target_layer, promotion.target_layer_id, promoted_id
            ),
        }
    )


def _beside_promoted(
    original: KnowledgeItem, kind: ApprovalKind, promoted_id: str, stamp: datetime
) -> KnowledgeItem:
    """The original after an approval: superseded by a replacement, else related to it."""
    if kind is ApprovalKind.REPLACEMENT:
        update: dict[str, Any] = {
            "status": KnowledgeStatus.SUPERSEDED,
            "superseded_by": promoted_id,
            "updated": stamp,
        }
    else:
        update = {
            "related": list(dict.fromkeys([*original.related, promoted_id])),
            "updated": stamp,
        }
    return original.model_copy(update=update)


class Promotions:
    """``ms.knowledge.promotions``: request, decide, get and list promotions."""

    def __init__(self, repository: Repository, writer: Writer) -> None:
        self._repository = repository
        self._writer = writer

    async def _commit(self, tenant: str, author: str, mutate: Mutation) -> Promotion:
        """Commit the plan ``mutate`` makes; the promotion it wrote, with that commit."""
        plan, commit = await self._writer.commit_change(tenant, author, mutate)
        return plan.result.model_copy(update={"commit": commit})  # type: ignore[no-any-return]

    async def _load(self, tenant: str, head: str | None, promotion_id: str) -> Promotion:
        path = promotion_path(promotion_id)
        data = None if head is None else await self._repository.read(tenant, path, head)
        if data is None:
            raise LaminaError(
                ErrorCode.ITEM_NOT_FOUND,
                f"no promotion {promotion_id!r} in tenant {tenant!r}",
                details={"id": promotion_id},
            )
        raw = load_yaml(path, data)
        try:
            return Promotion.model_validate({**(raw or {}), "commit": head})
        except ValidationError as exc:
            where, message = first_error(exc)
            raise FrontMatterError(path, where or None, message) from None

    @staticmethod
    def _file(promotion: Promotion) -> dict[str, bytes | None]:
        raw = promotion.model_dump(mode="json", exclude={"commit"})
        return {promotion_path(promotion.id): dump_yaml(raw)}

    async def request(
        self,
        item_id: str,
        *,
        target_layer: str | KnowledgeLayer,
        target_layer_id: str | None = None,
        reason: str | None = None,
        author: str = "lamina",
        tenant_id: str | None = None,
    ) -> Promotion:
        """Ask that an accepted item move to a strictly higher layer (one commit)."""
        tenant = self._repository.tenant(tenant_id)
        iid = check_id("id", item_id)
        layer, layer_id = check_layer(target_layer, target_layer_id)
        why = check_text("reason", reason, MAX_MESSAGE)
        who = check_author(author)

        async def mutate(head: str | None) -> Plan:
            item = await self._repository.item_at(tenant, head, iid)
            if item.status is not KnowledgeStatus.ACCEPTED:
                raise LaminaError(
                    ErrorCode.INVALID_TRANSITION,
                    f"only accepted items are promoted; {iid} is {item.status.value}",
                    details={"id": iid, "status": item.status.value},
                )
            _check_higher(item, layer, layer_id)
            stamp = now()
            promotion = Promotion(
                id=f"promo-{uuid.uuid4().hex[:12]}",
                item_id=iid,
                from_layer=item.layer,
                from_layer_id=item.layer_id,
                target_layer=layer,
                target_layer_id=layer_id,
                reason=why,
                requested_by=who,
                created=stamp,
                updated=stamp,
                events=[PromotionEvent(decision="requested", author=who, at=stamp, reason=why)],
            )
            return Plan(
                self._file(promotion),
                f"Request promotion of {iid} to {promotion_scope(layer, layer_id)}",
                result=promotion,
            )

        return await self._commit(tenant, who, mutate)

    async def decide(
        self,
        promotion_id: str,
        decision: str | PromotionDecision,
        *,
        approval: str | ApprovalKind | None = None,
        target_layer: str | KnowledgeLayer | None = None,
        target_layer_id: str | None = None,
        new_id: str | None = None,
        reason: str | None = None,
        author: str = "lamina",
        tenant_id: str | None = None,
    ) -> Promotion:
        """Decide an open request. ``approve`` (with ``approval``: how the promoted item
        relates to the original) creates the item at the target layer, accepted;
        ``replacement`` also supersedes the original. ``reject`` closes the request,
        ``needs_refinement`` sends it back (it can be decided again), ``retarget`` changes
        the target layer (``target_layer``/``target_layer_id``)."""
        tenant = self._repository.tenant(tenant_id)
        pid = check_id("promotion id", promotion_id)
        verdict = check_choice("decision", decision, PromotionDecision)
        kind = None if approval is None else check_choice("approval", approval, ApprovalKind)
        retarget = _check_decision(verdict, kind, target_layer, target_layer_id, new_id)
        chosen_id = None if new_id is None else check_id("new_id", new_id)
        why = check_text("reason", reason, MAX_MESSAGE)
        who = check_author(author)

        async def mutate(head: str | None) -> Plan:
            promotion = await self._load(tenant, head, pid)
            if promotion.status not in OPEN:
                raise LaminaError(
                    ErrorCode.INVALID_TRANSITION,
                    f"promotion {pid} is {promotion.status.value}; it cannot be decided again",
                    details={"id": pid, "status": promotion.status.value},
                )
            step = _Decision(promotion, verdict, who, why)
            if verdict is PromotionDecision.REJECT:
                step.update["status"] = PromotionStatus.REJECTED
            elif verdict is PromotionDecision.NEEDS_REFINEMENT:
                step.update["status"] = PromotionStatus.NEEDS_REFINEMENT
            elif verdict is PromotionDecision.RETARGET:
                assert retarget is not None
                await self._retarget(tenant, head, step, retarget)
            else:
                assert kind is not None
                await self._approve(tenant, head, step, kind, chosen_id)
            decided = promotion.model_copy(
                update={**step.update, "events": [*promotion.events, PromotionEvent(**step.event)]}
            )
            decided = Promotion.model_validate(decided.model_dump())
            step.files.update(self._file(decided))
            return Plan(step.files, step.message, items=step.items, result=decided)

        return await self._commit(tenant, who, mutate)

    async def _retarget(
        self,
        tenant: str,
        head: str | None,
        step: _Decision,
        target: tuple[KnowledgeLayer, str | None],
    ) -> None:
        """A new target layer for the request, strictly above the item; pending again."""
        original = await self._repository.item_at(tenant, head, step.promotion.item_id)
        _check_higher(original, *target)
        step.update.update(
            target_layer=target[0], target_layer_id=target[1], status=PromotionStatus.PENDING
        )
        step.event["details"] = {"target": promotion_scope(*target)}

    async def _approve(
        self,
        tenant: str,
        head: str | None,
        step: _Decision,
        kind: ApprovalKind,
        chosen_id: str | None,
    ) -> None:
        """The promoted item, accepted at the target layer, and the original beside it
        (superseded by it for a replacement, related to it otherwise)."""
        promotion = step.promotion
        original = await self._repository.item_at(tenant, head, promotion.item_id)
        if original.status is not KnowledgeStatus.ACCEPTED:
            raise LaminaError(
                ErrorCode.INVALID_TRANSITION,
                f"{original.id} is {original.status.value} now; only accepted items are promoted",
                details={"id": original.id, "status": original.status.value},
            )
        _check_higher(original, promotion.target_layer, promotion.target_layer_id)
        promoted_id = chosen_id or f"{original.id}-{promotion.target_layer.value}"
        if await self._repository.index.lookup(tenant, promoted_id) is not None:
            raise LaminaError(
                ErrorCode.ITEM_EXISTS,
                f"knowledge item {promoted_id!r} already exists; give new_id",
                details={"id": promoted_id},
            )
        promoted = _promoted(original, promotion, kind, promoted_id, step.stamp)
        changed = _beside_promoted(original, kind, promoted_id, step.stamp)
        violations = await self._writer.check_governance(tenant, promoted)
        step.files[promoted.path] = render(promoted)
        step.files[changed.path] = render(changed)
        step.items = [promoted, changed]
        step.update.update(status=PromotionStatus.APPROVED, approval=kind, promoted_id=promoted_id)
        step.event["details"] = {
            "approval": kind.value,
            "promoted_id": promoted_id,
            "warnings": [v.model_dump(mode="json") for v in violations],
        }
        step.message = (
            f"Promotion {promotion.id}: approve {original.id} as {kind.value} at "
            f"{promotion_scope(promotion.target_layer, promotion.target_layer_id)}"
            f" ({promoted_id})"
        )

    async def get(self, promotion_id: str, *, tenant_id: str | None = None) -> Promotion:
        tenant = self._repository.tenant(tenant_id)
        pid = check_id("promotion id", promotion_id)
        head = await self._repository.head(tenant)
        return await self._load(tenant, head, pid)

    async def list(
        self, *, status: str | PromotionStatus | None = None, tenant_id: str | None = None
    ) -> list[Promotion]:
        """Every promotion request, oldest first (optionally of one status)."""
        tenant = self._repository.tenant(tenant_id)
        wanted = None if status is None else check_choice("status", status, PromotionStatus)
        head = await self._repository.head(tenant)
        if head is None:
            return []
        files = await asyncio.to_thread(self._repository.git.files, tenant, head)
        out = []
        for path in sorted(files):
            if path.startswith("promotions/") and path.endswith(".yaml"):
                promotion = await self._load(tenant, head, path[len("promotions/") : -5])
                if wanted is None or promotion.status is wanted:
                    out.append(promotion)
        return sorted(out, key=lambda p: (p.created, p.id))


def promotion_scope(layer: KnowledgeLayer, layer_id: str | None) -> str:
    return layer.value if layer is KnowledgeLayer.COMPANY else f"{layer.value}/{layer_id}"
