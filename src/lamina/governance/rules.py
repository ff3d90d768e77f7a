"""Evaluating rules against a validation context, and merging policies down the layers.

What each operator checks, by target (the context field it reads; docs/governance.md has
the full table):

- must_use / must_not_use: file: the path contains value; code: value used as a word;
  dependency: a package of that name (``pkg>=1`` is ``pkg``); import: that module or one
  under it; config: the dotted key set to a true value.
- must_match / must_not_match: the regex searches the path, the content, any dependency or
  import entry, or any ``key=value`` of the flattened config.
- must_exist / must_not_exist: file: the path matches the glob value; code: the content
  contains value; dependency / import: an entry equals value; config: the dotted key exists.

A rule applies only when the context gives its target. Deny rules report a violation when
their check fails; allow rules exempt: when one holds, the same policy's deny rules on that
target report nothing.
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import re2

from lamina.governance.models import MergeNote, Policy, ValidationContext
from lamina.knowledge.policy import (
    MergeStrategy,
    PolicyMode,
    Rule,
    RuleOperator,
    RuleTarget,
    RuleType,
    Violation,
)

log = logging.getLogger("lamina.governance")

_FIELD = {
    RuleTarget.FILE: "path",
    RuleTarget.CODE: "content",
    RuleTarget.DEPENDENCY: "dependencies",
    RuleTarget.IMPORT: "imports",
    RuleTarget.CONFIG: "config",
}
_NAME_END = re.compile(r"[\s<>=!~;\[@(,]")
_patterns: dict[str, re.Pattern[str]] = {}
_MAX_PATTERNS = 20_000


def pattern(value: str, word: bool = False) -> re.Pattern[str]:
    key = ("w:" if word else "r:") + value
    found = _patterns.get(key)
    if found is None:
        if len(_patterns) >= _MAX_PATTERNS:
            _patterns.clear()
        source = rf"(?<![\w.]){re.escape(value)}(?![\w])" if word else value
        found = _patterns[key] = re.compile(source)
    return found


def _class_end(source: str, start: int) -> int:
    """The index after the character class opening at ``start``, or -1."""
    j = start + 1
    if source.startswith("^", j):
        j += 1
    if source.startswith("]", j):
        j += 1
    while j < len(source):
        if source[j] == "\\":
            j += 2
            continue
        if source[j] == "]":
            return j + 1
        j += 1
    return -1


def _without_lookarounds(source: str) -> str | None:
    """``source`` with its look-around groups removed: a pattern matching wherever
    ``source`` does (and more), or None when that cannot be told (unbalanced, a class)."""
    out: list[str] = []
    i = 0
    while i < len(source):
        if source.startswith(("(?=", "(?!", "(?<=", "(?<!"), i):
            depth, j = 0, i
            while j < len(source):
                c = source[j]
                if c == "\\":
                    j += 2
                    continue
                if c == "[":  # a class: its brackets and parentheses are characters
                    j = _class_end(source, j)
                    if j < 0:
                        return None
                    continue
                depth += c == "("
                depth -= c == ")"
                j += 1
                if depth == 0:
                    break
            if depth:
                return None
            i = j
            continue
        if source[i] == "\\":
            out.append(source[i : i + 2])
            i += 2
            continue
        out.append(source[i])
        i += 1
    return "".join(out)


class CodeScanner:
    """Every code rule of a policy set in one pass over the content: the rules' patterns go
    into one RE2 set (linear time, whatever the number of patterns); the few RE2 cannot run
    (look-arounds, back-references) are searched one by one with ``re`` — those with only
    look-arounds only where the pattern without them matched (an RE2 pre-filter)."""

    def __init__(self, policies: Sequence[Policy]) -> None:
        self._set: Any = re2.Set.SearchSet(re2.Options())
        self._index: dict[tuple[str, str], int] = {}
        self._fallback: dict[tuple[str, str], re.Pattern[str]] = {}
        self._prefilter: dict[tuple[str, str], int] = {}
        for policy in policies:
            for rule in policy.rules:
                if rule.target is not RuleTarget.CODE:
                    continue
                key = _code_key(rule)
                if key in self._index or key in self._fallback:
                    continue
                source = _code_source(rule)
                index = -1 if _NOT_RE2.search(source) else self._set.Add(source)
                if index >= 0:
                    self._index[key] = index
                elif key[0] == "l":  # a construct RE2 does not have: search it with re
                    self._fallback[key] = re.compile(re.escape(rule.value))
                else:
                    self._fallback[key] = pattern(rule.value, word=key[0] == "w")
                    loose = _without_lookarounds(source) if key[0] == "r" else None
                    if loose and not _NOT_RE2.search(loose):
                        # RE2 may refuse it after all: then it is searched every time
                        with contextlib.suppress(Exception):
                            self._prefilter[key] = self._set.Add(loose)
        self._set.Compile()

    def scan(self, content: str) -> set[tuple[str, str]]:
        """The keys of the code patterns found in ``content``."""
        found: set[tuple[str, str]] = set()
        hits: set[int] = set()
        if self._index or self._prefilter:
            hits = set(self._set.Match(content) or ())
            found.update(k for k, i in self._index.items() if i in hits)
        for key, rx in self._fallback.items():
            first = self._prefilter.get(key)
            if (first is None or first in hits) and rx.search(content):
                found.add(key)
        return found


#: Look-arounds, back-references, atomic groups, possessive quantifiers, \Z, comments.
_NOT_RE2 = re.compile(r"\(\?[=!]|\(\?<[=!]|\\[1-9]|\(\?P=|\(\?>|\\Z|\(\?#|[*+?}]\+")


def _code_key(rule: Rule) -> tuple[str, str]:
    op = rule.operator
    if op in (RuleOperator.MUST_MATCH, RuleOperator.MUST_NOT_MATCH):
        return ("r", rule.value)
    if op in (RuleOperator.MUST_USE, RuleOperator.MUST_NOT_USE):
        return ("w", rule.value)
    return ("l", rule.value)


def _code_source(rule: Rule) -> str:
    kind, value = _code_key(rule)
    if kind == "r":
        return value
    if kind == "w":
        return rf"(?:^|[^\w.]){re2.escape(value)}(?:$|[^\w])"
    return re2.escape(value) if value else r"(?s)."


def _package(dep: str) -> str:
    return _NAME_END.split(dep.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, name + "."))
        out[name] = value
    return out


class Subject:
    """A context prepared once for many rules (flattened config, package names)."""

    def __init__(self, ctx: ValidationContext, scanner: CodeScanner | None = None) -> None:
        self.ctx = ctx
        given = ctx.model_fields_set
        self.targets = {t for t, name in _FIELD.items() if name in given}
        self.packages = {_package(d) for d in ctx.dependencies}
        self.modules = set(ctx.imports)
        self.module_prefixes = {
            ".".join(parts[:n])
            for m in ctx.imports
            for parts in [m.split(".")]
            for n in range(1, len(parts) + 1)
        }
        self.code_found: set[tuple[str, str]] | None = None
        if scanner is not None and ctx.content is not None:
            self.code_found = scanner.scan(ctx.content)
        self.config = _flatten(ctx.config)
        self.config_lines = [f"{k}={v}" for k, v in self.config.items()]

    def entries(self, target: RuleTarget) -> list[str]:
        if target is RuleTarget.DEPENDENCY:
            return self.ctx.dependencies
        if target is RuleTarget.IMPORT:
            return self.ctx.imports
        return self.config_lines

    def scalar(self, target: RuleTarget) -> str:
        value = self.ctx.path if target is RuleTarget.FILE else self.ctx.content
        return value or ""

    def uses(self, rule: Rule) -> tuple[bool, str | None]:
        t, v = rule.target, rule.value
        if t is RuleTarget.FILE:
            return v in self.scalar(t), self.ctx.path
        if t is RuleTarget.CODE:
            if self.code_found is not None and ("w", v) not in self.code_found:
                return False, None
            found = pattern(v, word=True).search(self.scalar(t))
            return found is not None, found.group(0) if found else None
        if t is RuleTarget.DEPENDENCY:
            name = _package(v)
            return name in self.packages, name
        if t is RuleTarget.IMPORT:
            if v not in self.module_prefixes:
                return False, None
            hit = next((m for m in self.modules if m == v or m.startswith(v + ".")), None)
            return hit is not None, hit
        return bool(self.config.get(v)), v

    def matches(self, rule: Rule) -> tuple[bool, str | None]:
        regex = pattern(rule.value)
        if (
            rule.target is RuleTarget.CODE
            and self.code_found is not None
            and ("r", rule.value) not in self.code_found
        ):
            return False, None
        if rule.target in (RuleTarget.FILE, RuleTarget.CODE):
            found = regex.search(self.scalar(rule.target))
            return found is not None, found.group(0)[:200] if found else None
        hit = next((e for e in self.entries(rule.target) if regex.search(e)), None)
        return hit is not None, hit

    def exists(self, rule: Rule) -> tuple[bool, str | None]:
        t, v = rule.target, rule.value
        if t is RuleTarget.FILE:
            path = self.ctx.path or ""
            return (fnmatch.fnmatch(path, v) if v else bool(path)), path
        if t is RuleTarget.CODE:
            if self.code_found is not None:
                return ("l", v) in self.code_found, v or None
            content = self.scalar(t)
            return (v in content if v else bool(content)), v or None
        if t is RuleTarget.CONFIG:
            return (v in self.config if v else bool(self.config)), v or None
        entries = self.entries(t)
        return (v in entries if v else bool(entries)), v or None

    def holds(self, rule: Rule) -> tuple[bool, str | None]:
        """Whether the rule's check passes, and the evidence (what matched or is missing)."""
        op = rule.operator
        if op in (RuleOperator.MUST_USE, RuleOperator.MUST_NOT_USE):
            found, evidence = self.uses(rule)
            return found == (op is RuleOperator.MUST_USE), evidence
        if op in (RuleOperator.MUST_MATCH, RuleOperator.MUST_NOT_MATCH):
            found, evidence = self.matches(rule)
            return found == (op is RuleOperator.MUST_MATCH), evidence
        found, evidence = self.exists(rule)
        return found == (op is RuleOperator.MUST_EXIST), evidence


def _message(rule: Rule) -> str:
    if rule.message:
        return rule.message
    verb = rule.operator.value.replace("_", " ")
    return f"{rule.target.value} {verb} {rule.value!r}".strip()


def evaluate(
    policies: Iterable[Policy], ctx: ValidationContext, scanner: CodeScanner | None = None
) -> tuple[list[Violation], int]:
    """The violations of ``policies`` by ``ctx``, and how many rules applied. ``scanner``
    (a CodeScanner of the same policies) finds every code pattern in one pass."""
    subject = Subject(ctx, scanner)
    violations: list[Violation] = []
    applied = 0
    for policy in policies:
        exempt: set[RuleTarget] = set()
        for rule in policy.rules:
            if rule.type is RuleType.ALLOW and rule.target in subject.targets:
                applied += 1
                if subject.holds(rule)[0]:
                    exempt.add(rule.target)
        for rule in policy.rules:
            if rule.type is not RuleType.DENY or rule.target not in subject.targets:
                continue
            applied += 1
            if rule.target in exempt:
                continue
            ok, evidence = subject.holds(rule)
            if ok:
                continue
            where: dict[str, Any] = {"target": rule.target.value, "operator": rule.operator.value}
            if ctx.path:
                where["path"] = ctx.path
            if rule.target is RuleTarget.CODE and evidence and ctx.content:
                where["line"] = ctx.content.count("\n", 0, max(ctx.content.find(evidence), 0)) + 1
            if evidence:
                # what a secret rule found is never repeated in full
                where["evidence"] = evidence[:4] + "…" if policy.builtin else evidence
            violations.append(
                Violation(
                    rule_id=rule.id,
                    policy_id=policy.id,
                    severity=rule.severity,
                    message=_message(rule),
                    context=where,
                )
            )
    return violations, applied


def merge(layers: Iterable[tuple[str, list[Policy]]]) -> tuple[list[Policy], list[MergeNote]]:
    """Merge policies from the broadest layer down. A policy id seen again lower down changes
    by the lower policy's strategy: override replaces it, merge adds and replaces rules by id,
    intersect keeps only the rules both define (the lower version). A mandatory policy
    changes only by override; built-in policies never change."""
    merged: dict[str, Policy] = {}
    notes: list[MergeNote] = []
    for scope, policies in layers:
        for policy in policies:
            above = merged.get(policy.id)
            if above is None:
                merged[policy.id] = policy
                continue
            strategy = policy.merge_strategy
            if above.builtin:
                notes.append(MergeNote(policy_id=policy.id, layer=scope, reason="built-in policy"))
                continue
            if above.mode is PolicyMode.MANDATORY and strategy is not MergeStrategy.OVERRIDE:
                notes.append(
                    MergeNote(
                        policy_id=policy.id,
                        layer=scope,
                        reason=f"mandatory above: {strategy.value} ignored (only override "
                        "changes it)",
                    )
                )
                continue
            if strategy is MergeStrategy.OVERRIDE:
                merged[policy.id] = policy
            elif strategy is MergeStrategy.MERGE:
                rules = {r.id: r for r in above.rules}
                rules.update({r.id: r for r in policy.rules})
                merged[policy.id] = policy.model_copy(
                    update={"rules": list(rules.values()), "mode": above.mode}
                )
            else:
                mine = {r.id: r for r in policy.rules}
                kept = [mine[r.id] for r in above.rules if r.id in mine]
                merged[policy.id] = policy.model_copy(update={"rules": kept, "mode": above.mode})
    return list(merged.values()), notes
