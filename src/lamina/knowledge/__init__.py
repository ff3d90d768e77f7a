"""The git-backed knowledge repository: ADRs, policies, patterns and specs (the models and
the policy rules, importable from here as one)."""

from lamina.knowledge import models, policy
from lamina.knowledge.models import *  # noqa: F403
from lamina.knowledge.policy import *  # noqa: F403

__all__ = models.__all__ + policy.__all__
