"""Policies, rules, violations and the results of validation and drift."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class RuleType(StrEnum):
    ALLOW = "allow"
    DENY = "deny"


class RuleTarget(StrEnum):
    FILE = "file"  # the context's ``path``
    CODE = "code"  # the context's ``content``
    DEPENDENCY = "dependency"  # the context's ``dependencies``
    IMPORT = "import"  # the context's ``imports``
    CONFIG = "config"  # the context's ``config``


class RuleOperator(StrEnum):
    MUST_USE = "must_use"
    MUST_NOT_USE = "must_not_use"
    MUST_MATCH = "must_match"
    MUST_NOT_MATCH = "must_not_match"
    MUST_EXIST = "must_exist"
    MUST_NOT_EXIST = "must_not_exist"


class Severity(StrEnum):
    INFO = "info"
    WARN = "warn"
    BLOCK = "block"


class PolicyMode(StrEnum):
    MANDATORY = "mandatory"
    OPTIONAL = "optional"


class MergeStrategy(StrEnum):
    OVERRIDE = "override"
    MERGE = "merge"
    INTERSECT = "intersect"


#: Drift weight of one violation of each severity.
SEVERITY_WEIGHT = {Severity.BLOCK: 1.0, Severity.WARN: 0.5, Severity.INFO: 0.1}

REGEX_OPERATORS = frozenset({RuleOperator.MUST_MATCH, RuleOperator.MUST_NOT_MATCH})
_RULE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


class Rule(BaseModel):
    """One check. ``deny`` rules report a violation when their check fails; ``allow`` rules
    exempt: when an allow rule's check holds, the policy's deny rules on the same target
    report nothing for that context."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    type: RuleType = RuleType.DENY
    target: RuleTarget
    operator: RuleOperator
    value: str = ""
    severity: Severity = Severity.WARN
    message: str = ""

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not _RULE_ID.match(value):
            raise ValueError("a rule id is 1-128 letters, digits, '.', '_', ':' or '-'")
        return value

    @model_validator(mode="after")
    def _check_value(self) -> Rule:
        if self.operator in REGEX_OPERATORS:
            if not self.value:
                raise ValueError(f"{self.operator.value} needs a regular expression in value")
            try:
                re.compile(self.value)
            except re.error as exc:
                raise ValueError(f"value is not a valid regular expression: {exc}") from None
        elif self.operator in (RuleOperator.MUST_USE, RuleOperator.MUST_NOT_USE) and not (
            self.value
        ):
            raise ValueError(f"{self.operator.value} needs a value")
        return self


class Policy(BaseModel):
    """A set of rules at one layer. Lower layers change a policy of the same id by its merge
    strategy; a mandatory policy changes lower down only by override."""

    model_config = ConfigDict(frozen=True)

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


class Violation(BaseModel):
    model_config = ConfigDict(frozen=True)

    rule_id: str
    policy_id: str
    severity: Severity
    message: str
    context: dict[str, Any] = Field(default_factory=dict)


class MergeNote(BaseModel):
    """A lower-layer change that did not apply (a mandatory policy changed by merge or
    intersect)."""

    model_config = ConfigDict(frozen=True)

    policy_id: str
    layer: str
    reason: str


class ValidationResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    is_valid: bool
    violations: list[Violation]
    policies_applied: list[str]
    rules_evaluated: int
    notes: list[MergeNote] = Field(default_factory=list)

    def blocking(self) -> list[Violation]:
        return [v for v in self.violations if v.severity is Severity.BLOCK]


class DriftReport(BaseModel):
    """``score`` in [0, 1]: the weighted violations over the weight of every rule checked
    (block 1.0, warn 0.5, info 0.1)."""

    model_config = ConfigDict(frozen=True)

    layer: str
    layer_id: str | None
    score: float
    contexts: int
    rules_evaluated: int
    counts: dict[str, int]
    violations: list[Violation]
