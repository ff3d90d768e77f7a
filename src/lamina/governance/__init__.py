"""Policies merged from the company down, validation, drift and the checks of writes."""

from lamina.governance.models import (
    DriftReport,
    MergeStrategy,
    Policy,
    PolicyMode,
    Rule,
    RuleOperator,
    RuleTarget,
    RuleType,
    Severity,
    ValidationContext,
    ValidationResult,
    Violation,
)

__all__ = [
    "DriftReport",
    "MergeStrategy",
    "Policy",
    "PolicyMode",
    "Rule",
    "RuleOperator",
    "RuleTarget",
    "RuleType",
    "Severity",
    "ValidationContext",
    "ValidationResult",
    "Violation",
]
