"""The built-in rule set: secrets never enter shared layers."""

from __future__ import annotations

from lamina.governance.models import Policy
from lamina.knowledge.policy import (
    MergeStrategy,
    PolicyMode,
    Rule,
    RuleOperator,
    RuleTarget,
    RuleType,
    Severity,
)

SECRETS_POLICY_ID = "builtin-secrets"

_SECRETS = (
    ("private-key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----", "a private key"),
    ("aws-access-key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", "an AWS access key id"),
    (
        "aws-secret-key",
        r"(?i)aws_?secret_?access_?key\s*[:=]\s*['\"]?[A-Za-z0-9/+=]{40}",
        "an AWS secret access key",
    ),
    (
        "github-token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})",
        "a GitHub token",
    ),
    ("openai-key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}", "an OpenAI-style API key"),
    ("anthropic-key", r"\bsk-ant-[A-Za-z0-9_-]{20,}", "an Anthropic API key"),
    ("slack-token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}", "a Slack token"),
    ("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}\b", "a Google API key"),
    ("stripe-key", r"\b(?:sk|rk)_live_[0-9A-Za-z]{20,}", "a Stripe live key"),
    (
        "jwt",
        r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        "a JSON web token",
    ),
    (
        "url-credentials",
        r"\b[a-z][a-z0-9+.-]*://[^\s:/@]+:[^\s:/@]{3,}@[^\s/]+",
        "a URL with a password",
    ),
    (
        "assigned-secret",
        r"(?i)\b(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token"
        r"|client[_-]?secret|token)\b\s*[:=]\s*['\"]?(?=[^\s'\"]*[0-9!@#$%^&*+/_-])"
        r"[^\s'\"]{8,}",
        "a password, token or key assigned a value",
    ),
)


def secrets_policy() -> Policy:
    return Policy(
        id=SECRETS_POLICY_ID,
        name="No secrets in shared layers",
        description="Blocks API keys, private keys, passwords and tokens from entering "
        "shared memory and knowledge.",
        layer="company",
        mode=PolicyMode.MANDATORY,
        merge_strategy=MergeStrategy.OVERRIDE,
        builtin=True,
        rules=[
            Rule(
                id=f"secret-{name}",
                type=RuleType.DENY,
                target=RuleTarget.CODE,
                operator=RuleOperator.MUST_NOT_MATCH,
                value=regex,
                severity=Severity.BLOCK,
                message=f"contains {what}; secrets may not enter shared layers",
            )
            for name, regex, what in _SECRETS
        ],
    )
