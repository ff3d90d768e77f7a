"""Knowledge items (ADRs, policies, patterns, specs), their statuses, layers and history."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import Field

from lamina.knowledge.policy import MergeStrategy, PolicyMode, Rule, Severity, Violation
from lamina.shapes import Frozen

__all__ = [
    "ApprovalKind",
    "HistoryEntry",
    "KnowledgeChange",
    "KnowledgeDiff",
    "KnowledgeHit",
    "KnowledgeItem",
    "KnowledgeLayer",
    "KnowledgePage",
    "KnowledgeRecord",
    "KnowledgeStatus",
    "KnowledgeType",
    "Promotion",
    "PromotionDecision",
    "PromotionStatus",
]


class KnowledgeType(StrEnum):
    ADR = "adr"
    POLICY = "policy"
    PATTERN = "pattern"
    SPEC = "spec"


class KnowledgeStatus(StrEnum):
    DRAFT = "draft"
    PROPOSED = "proposed"
    ACCEPTED = "accepted"
    DEPRECATED = "deprecated"
    SUPERSEDED = "superseded"
    REJECTED = "rejected"


class KnowledgeLayer(StrEnum):
    """Where an item applies, from the broadest: company, org, team, project."""

    COMPANY = "company"
    ORG = "org"
    TEAM = "team"
    PROJECT = "project"


#: Higher is broader; a promotion moves an item to a strictly higher rank.
LAYER_RANK = {
    KnowledgeLayer.PROJECT: 1,
    KnowledgeLayer.TEAM: 2,
    KnowledgeLayer.ORG: 3,
    KnowledgeLayer.COMPANY: 4,
}

TRANSITIONS: dict[KnowledgeStatus, frozenset[KnowledgeStatus]] = {
    KnowledgeStatus.DRAFT: frozenset({KnowledgeStatus.PROPOSED, KnowledgeStatus.REJECTED}),
    KnowledgeStatus.PROPOSED: frozenset({KnowledgeStatus.ACCEPTED, KnowledgeStatus.REJECTED}),
    KnowledgeStatus.ACCEPTED: frozenset({KnowledgeStatus.DEPRECATED, KnowledgeStatus.SUPERSEDED}),
    KnowledgeStatus.DEPRECATED: frozenset(),
    KnowledgeStatus.SUPERSEDED: frozenset(),
    KnowledgeStatus.REJECTED: frozenset(),
}

#: Statuses an item may be created with (review may happen before it enters the repository).
INITIAL_STATUSES = (KnowledgeStatus.DRAFT, KnowledgeStatus.PROPOSED, KnowledgeStatus.ACCEPTED)


class KnowledgeItem(Frozen):
    """One item as stored: the front matter fields, the Markdown body, where it lives."""

    id: str
    type: KnowledgeType
    layer: KnowledgeLayer
    layer_id: str | None = None
    title: str
    summary: str = ""
    status: KnowledgeStatus = KnowledgeStatus.DRAFT
    severity: Severity = Severity.INFO
    tags: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    authors: list[str] = Field(default_factory=list)
    related: list[str] = Field(default_factory=list)
    supersedes: list[str] = Field(default_factory=list)
    superseded_by: str | None = None
    created: datetime
    updated: datetime
    body: str = ""
    #: Policies only: the policy this item defines (default: the item's id; a lower layer
    #: names a higher layer's policy to change it by its merge strategy), how it applies,
    #: and its rules.
    policy_id: str | None = None
    mode: PolicyMode | None = None
    merge_strategy: MergeStrategy | None = None
    rules: list[Rule] = Field(default_factory=list)
    #: The file inside the repository and the commit this version was read at.
    path: str = ""
    commit: str | None = None

    @property
    def scope(self) -> str:
        """``company`` or ``team/<id>``-style: the layer and its id."""
        return scope_name(self.layer, self.layer_id)


def scope_name(layer: KnowledgeLayer, layer_id: str | None) -> str:
    return layer.value if layer is KnowledgeLayer.COMPANY else f"{layer.value}/{layer_id}"


class HistoryEntry(Frozen):
    """One commit that changed an item."""

    commit: str
    author: str
    message: str
    timestamp: datetime
    status: KnowledgeStatus | None = None
    deleted: bool = False


class KnowledgeRecord(Frozen):
    """``get(..., history=True)``: the item and the commits that changed it, newest first."""

    item: KnowledgeItem
    history: list[HistoryEntry]


class KnowledgeChange(Frozen):
    """The result of a write: the item as committed, the commit, and policy violations that
    did not block it (warn, info)."""

    item: KnowledgeItem
    commit: str
    violations: list[Violation] = Field(default_factory=list)


class KnowledgeHit(Frozen):
    item: KnowledgeItem
    score: float


class KnowledgePage(Frozen):
    items: list[KnowledgeItem]
    next_cursor: str | None
    total_count: int


class KnowledgeDiff(Frozen):
    id: str
    path: str
    from_commit: str | None
    to_commit: str
    diff: str


class PromotionDecision(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"
    NEEDS_REFINEMENT = "needs_refinement"
    RETARGET = "retarget"


class ApprovalKind(StrEnum):
    """How an approved promotion relates to the original item."""

    REPLACEMENT = "replacement"  # the promoted item supersedes the original
    SPECIALIZATION = "specialization"  # the original stays as a specialization of it
    APPLICABILITY = "applicability"  # the promoted item widens where the original applies
    EXCEPTION = "exception"  # the original stays as a local exception to it
    CLARIFICATION = "clarification"  # the promoted item clarifies the original


class PromotionStatus(StrEnum):
    PENDING = "pending"
    NEEDS_REFINEMENT = "needs_refinement"
    APPROVED = "approved"
    REJECTED = "rejected"


class PromotionEvent(Frozen):
    decision: str
    author: str
    at: datetime
    reason: str = ""
    details: dict[str, Any] = Field(default_factory=dict)


class Promotion(Frozen):
    """A request that an accepted item move to a strictly higher layer, and its decisions."""

    id: str
    item_id: str
    from_layer: KnowledgeLayer
    from_layer_id: str | None = None
    target_layer: KnowledgeLayer
    target_layer_id: str | None = None
    status: PromotionStatus = PromotionStatus.PENDING
    reason: str = ""
    requested_by: str
    created: datetime
    updated: datetime
    approval: ApprovalKind | None = None
    promoted_id: str | None = None
    events: list[PromotionEvent] = Field(default_factory=list)
    commit: str | None = None
