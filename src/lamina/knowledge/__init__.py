"""The git-backed knowledge repository: ADRs, policies, patterns and specs."""

from lamina.knowledge.models import (
    ApprovalKind,
    HistoryEntry,
    KnowledgeChange,
    KnowledgeDiff,
    KnowledgeHit,
    KnowledgeItem,
    KnowledgeLayer,
    KnowledgePage,
    KnowledgeRecord,
    KnowledgeStatus,
    KnowledgeType,
    Promotion,
    PromotionDecision,
    PromotionStatus,
)

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
