"""The context layers and the public shapes of what lives in them."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import Field

from lamina.errors import ErrorCode, LaminaError
from lamina.shapes import Frozen


class ContextLayer(StrEnum):
    """What kind of context an item is (not whose: that is the memory scope layer)."""

    TOOL_REGISTRY = "tool_registry"
    USER_KNOWLEDGE = "user_knowledge"
    SKILL_PATTERNS = "skill_patterns"
    EXTERNAL_KNOWLEDGE = "external_knowledge"
    AGENT_LEARNINGS = "agent_learnings"
    RUNTIME_CONTEXT = "runtime_context"
    OBSERVATIONS = "observations"
    REFLECTIONS = "reflections"

    @classmethod
    def parse(cls, value: object) -> ContextLayer:
        if isinstance(value, ContextLayer):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            raise LaminaError(
                ErrorCode.INVALID_LAYER,
                f"unknown context layer {value!r}; expected one of "
                + ", ".join(m.value for m in cls),
                details={"layer": str(value), "valid": [m.value for m in cls]},
            ) from None


#: Searched when ``retrieve`` is given no layers; tools and runtime context are asked for.
DEFAULT_LAYERS = (
    ContextLayer.USER_KNOWLEDGE,
    ContextLayer.SKILL_PATTERNS,
    ContextLayer.EXTERNAL_KNOWLEDGE,
    ContextLayer.AGENT_LEARNINGS,
)

#: Every layer but observations and reflections: what the context-aware model retrieves.
MODEL_LAYERS = (
    ContextLayer.RUNTIME_CONTEXT,
    ContextLayer.TOOL_REGISTRY,
    *DEFAULT_LAYERS,
)


class ContextItem(Frozen):
    """One retrieved piece of context. ``fields`` holds what the prompt section shows
    (a tool's name and description, a learning's trigger and fix, ...)."""

    layer: ContextLayer
    key: str
    content: str
    score: float
    source: str = ""
    category: str = ""
    fields: dict[str, Any] = Field(default_factory=dict)


class RetrievalResult(Frozen):
    """Items per layer (only the layers asked for), and the keywords the query gave."""

    query: str
    keywords: list[str]
    items: dict[ContextLayer, list[ContextItem]] = Field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(len(v) for v in self.items.values())

    def all(self) -> list[ContextItem]:
        return [item for items in self.items.values() for item in items]


class KnowledgeCategory(StrEnum):
    RULE = "rule"
    DEFINITION = "definition"
    PREFERENCE = "preference"
    FACT = "fact"
    PATTERN = "pattern"
    CORRECTION = "correction"


class LearningCategory(StrEnum):
    TOOL_ERROR = "tool_error"
    PROVIDER_ERROR = "provider_error"
    USER_CORRECTION = "user_correction"
    TIMEOUT = "timeout"
    PERMISSION = "permission"
    GENERAL = "general"


class SkillType(StrEnum):
    COMPOSITE = "composite"
    SCRIPT = "script"
    TEMPLATE = "template"


class _Stored(Frozen):
    id: str
    version: int
    is_latest: bool
    tags: list[str] = Field(default_factory=list)
    created_at: datetime
    updated_at: datetime


class UserKnowledge(_Stored):
    """What the user taught the agent. Saving an existing key adds a version."""

    key: str
    category: KnowledgeCategory
    content: str
    source: str = ""
    use_count: int = 0
    relevance_score: float = 1.0


class AgentLearning(_Stored):
    """What the agent learned from an error: when ``trigger`` happens, apply ``fix``."""

    trigger: str
    error_pattern: str = ""
    diagnosis: str = ""
    fix: str = ""
    category: LearningCategory = LearningCategory.GENERAL
    occurrence_count: int = 1
    success_count: int = 0
    confidence: float = 0.5


class SkillPattern(_Stored):
    name: str
    description: str
    type: SkillType
    definition: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)


class ExternalReference(_Stored):
    name: str
    ref_type: str
    location: str
    summary: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
