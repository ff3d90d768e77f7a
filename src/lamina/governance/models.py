"""Policies, validation contexts and the results of validation and drift (the rules,
severities and violations they use are knowledge's, in ``lamina.knowledge.policy``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lamina.knowledge.policy import MergeStrategy, PolicyMode, Rule, Severity, Violation
from lamina.shapes import Frozen

#: Drift weight of one violation of each severity.
SEVERITY_WEIGHT = {Severity.BLOCK: 1.0, Severity.WARN: 0.5, Severity.INFO: 0.1}


class Policy(Frozen):
    """A set of rules at one layer. Lower layers change a policy of the same id by its merge
    strategy; a mandatory policy changes lower down only by override."""

    id: str
    name: str
    description: str = ""
    layer: str
    layer_id: str | None = None
    mode: PolicyMode = PolicyMode.OPTIONAL
    merge_strategy: MergeStrategy = MergeStrategy.MERGE
    rules: list[Rule] = Field(default_factory=list)
    builtin: bool = False


class ValidationContext(BaseModel):
    """What is validated: a file's path and content, its dependencies, imports and config."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str | None = None
    content: str | None = None
    dependencies: list[str] = Field(default_factory=list)
    imports: list[str] = Field(default_factory=list)
    config: dict[str, Any] = Field(default_factory=dict)


class MergeNote(Frozen):
    """A lower-layer change that did not apply (a mandatory policy changed by merge or
    intersect)."""

    policy_id: str
    layer: str
    reason: str


class ValidationResult(Frozen):
    is_valid: bool
    violations: list[Violation]
    policies_applied: list[str]
    rules_evaluated: int
    notes: list[MergeNote] = Field(default_factory=list)

    def blocking(self) -> list[Violation]:
        return [v for v in self.violations if v.severity is Severity.BLOCK]


class DriftReport(Frozen):
    """``score`` in [0, 1]: the weighted violations over the weight of every rule checked
    (block 1.0, warn 0.5, info 0.1)."""

    layer: str
    layer_id: str | None
    score: float
    contexts: int
    rules_evaluated: int
    counts: dict[str, int]
    violations: list[Violation]
