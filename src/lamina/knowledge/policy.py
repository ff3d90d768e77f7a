"""The policy vocabulary knowledge items carry: rules, severities, modes, merge strategies and
violations (governance evaluates them; policies are knowledge items of type policy)."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lamina.shapes import Frozen

__all__ = [
    "MergeStrategy",
    "PolicyMode",
    "Rule",
    "RuleOperator",
    "RuleTarget",
    "RuleType",
    "Severity",
    "Violation",
]


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


class Violation(Frozen):
    rule_id: str
    policy_id: str
    severity: Severity
    message: str
    context: dict[str, Any] = Field(default_factory=dict)
