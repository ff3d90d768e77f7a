"""The built-in rule set: secrets never enter shared layers.

The patterns find a secret where it stands and in its trivial disguises: lower-cased (an AWS
key id), glued to a word (no word boundary needed), or split across a line break (every text
is also scanned with its line breaks and the indentation after them removed).
``secret_views`` gives the texts to scan, ``redact_secrets`` the text with what was found
replaced."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from lamina.governance.models import Policy
from lamina.governance.rules import CodeScanner
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
    (
        "aws-access-key",
        r"(?:AKIA|ASIA)[0-9A-Z]{16}|(?:akia|asia)[0-9a-z]{16}",
        "an AWS access key id",
    ),
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


#: A line break with the spaces around it, and a backslash continuing the line.
_BREAK = re.compile(r"[ \t]*\\?\r?\n[ \t]*")
_FOUND = [re.compile(regex) for _, regex, _ in _SECRETS]
REDACTED = "[REDACTED]"


def _joined(text: str) -> tuple[str, list[int]]:
    """``text`` without its line breaks, and where each kept character came from."""
    kept: list[int] = []
    parts: list[str] = []
    start = 0
    for found in _BREAK.finditer(text):
        parts.append(text[start : found.start()])
        kept.extend(range(start, found.start()))
        start = found.end()
    parts.append(text[start:])
    kept.extend(range(start, len(text)))
    return "".join(parts), kept


def secret_views(text: str) -> list[str]:
    """The texts the secret rules search for ``text``: itself and, when it has line breaks,
    the text with them removed (a key split over two lines is one key again)."""
    if "\n" not in text:
        return [text]
    return [text, _joined(text)[0]]


def _spans(text: str) -> Iterator[tuple[int, int]]:
    joined, kept = _joined(text) if "\n" in text else (text, list(range(len(text))))
    for view, where in ((text, None), (joined, kept)):
        for regex in _FOUND:
            for found in regex.finditer(view):
                if found.end() == found.start():
                    continue
                if where is None:
                    yield found.start(), found.end()
                else:
                    yield where[found.start()], where[found.end() - 1] + 1
        if joined == text:
            break


_scanner: list[CodeScanner] = []


def has_secret(text: str) -> bool:
    """Whether the built-in rules find a secret in ``text`` (one RE2 pass per view)."""
    if not _scanner:
        _scanner.append(CodeScanner([secrets_policy()]))
    return any(_scanner[0].scan(view) for view in secret_views(text))


def redact_secrets(text: str) -> str:
    """``text`` with every secret the built-in rules find replaced by ``[REDACTED]``."""
    if not has_secret(text):
        return text
    merged: list[list[int]] = []
    for start, end in sorted(_spans(text)):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out: list[str] = []
    last = 0
    for start, end in merged:
        out += [text[last:start], REDACTED]
        last = end
    out.append(text[last:])
    return "".join(out)


def strings_of(value: Any) -> Iterator[str]:
    """Every string in a JSON value (keys too)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings_of(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings_of(item)


def any_secret(texts: Iterable[str]) -> bool:
    """Whether any of ``texts`` holds a secret: one scan of them all (NUL-separated: a
    secret never spans two of them)."""
    return has_secret("\x00".join(texts))


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact_secrets(value)
    if isinstance(value, dict):
        return {redact_secrets(str(k)): _redacted(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(v) for v in value]
    return value


def redact_json(value: Any) -> Any:
    """A JSON value with ``redact_secrets`` applied to every string in it (keys too); the
    value itself when there is no secret in it."""
    return _redacted(value) if any_secret(strings_of(value)) else value
