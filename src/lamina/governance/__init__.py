"""Policies merged from the company down, validation, drift and the checks of writes."""

from lamina.governance.models import (
    DriftReport,
    Policy,
    ValidationContext,
    ValidationResult,
)

__all__ = [
    "DriftReport",
    "Policy",
    "ValidationContext",
    "ValidationResult",
]
