"""``ms.governance``: the policies in force at a layer (merged from the company down), the
validation of content and changes against them, drift scores, and the checks of writes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from lamina.checks import first_error, invalid, too_long
from lamina.config import GovernanceSettings
from lamina.errors import ErrorCode, LaminaError
from lamina.governance.builtin import secret_views, secrets_policy
from lamina.governance.models import (
    SEVERITY_WEIGHT,
    DriftReport,
    MergeNote,
    Policy,
    ValidationContext,
    ValidationResult,
)
from lamina.governance.rules import CodeScanner, evaluate, merge
from lamina.knowledge.document import check_layer
from lamina.knowledge.models import KnowledgeItem, KnowledgeLayer, KnowledgeType
from lamina.knowledge.policy import MergeStrategy, PolicyMode, Severity, Violation
from lamina.knowledge.service import KnowledgeService
from lamina.knowledge.writes import GuardedWrite

#: Memory layers shared beyond one person or agent, and the knowledge layer each maps to.
SHARED_MEMORY_LAYERS = {
    "project": KnowledgeLayer.PROJECT,
    "team": KnowledgeLayer.TEAM,
    "org": KnowledgeLayer.ORG,
    "company": KnowledgeLayer.COMPANY,
}
MAX_CONTEXTS = 1_000

Resolver = Callable[..., Awaitable[dict[str, Any]]]


def policy_of(item: KnowledgeItem) -> Policy:
    return Policy(
        id=item.policy_id or item.id,
        name=item.title,
        description=item.summary or item.body[:500],
        layer=item.layer.value,
        layer_id=item.layer_id,
        mode=item.mode or PolicyMode.OPTIONAL,
        merge_strategy=item.merge_strategy or MergeStrategy.MERGE,
        rules=item.rules,
    )


def _context(value: object) -> ValidationContext:
    if isinstance(value, ValidationContext):
        return value
    if not isinstance(value, Mapping):
        raise invalid(
            "context must be an object with path, content, dependencies, imports, config",
            "context",
        )
    try:
        return ValidationContext.model_validate(dict(value))
    except ValidationError as exc:
        where, message = first_error(exc, "context")
        raise invalid(f"{where}: {message}", where) from None


class _Effective:
    """The merged policies at one chain of scopes, as of a repository head, with the code
    scanner of their rules (built on first use)."""

    def __init__(self, head: str | None, policies: list[Policy], notes: list[MergeNote]) -> None:
        self.head = head
        self.policies = policies
        self.notes = notes
        self._scanner: CodeScanner | None = None

    def scanner(self) -> CodeScanner:
        if self._scanner is None:
            self._scanner = CodeScanner(self.policies)
        return self._scanner


class GovernanceService:
    def __init__(
        self,
        knowledge: KnowledgeService,
        resolve: Resolver,
        settings: GovernanceSettings,
        *,
        max_content_length: int,
    ) -> None:
        self._knowledge = knowledge
        self._resolve = resolve
        self._settings = settings
        self._max_content = max_content_length
        self._cache: dict[tuple[str, tuple[str, ...]], _Effective] = {}
        self._secrets = _Effective(None, [secrets_policy()], [])

    async def chain(
        self,
        tenant: str,
        layer: KnowledgeLayer,
        layer_id: str | None,
        resolved: Mapping[str, str] | None = None,
    ) -> list[str]:
        """The scopes whose policies apply at this layer, broadest first. ``resolved``:
        identifiers already resolved through the hierarchy (else they are resolved here)."""
        scopes = ["company"]
        if layer is KnowledgeLayer.COMPANY:
            return scopes
        if resolved is None:
            key = {"org": "org_id", "team": "team_id", "project": "project_id"}[layer.value]
            resolved = (await self._resolve(tenant_id=tenant, **{key: layer_id}))["identifiers"]
        for name, level in (("org_id", "org"), ("team_id", "team"), ("project_id", "project")):
            value = resolved.get(name)
            if value:
                scopes.append(f"{level}/{value}")
            if level == layer.value:
                break
        return scopes

    async def _effective(
        self,
        tenant: str,
        layer: KnowledgeLayer,
        layer_id: str | None,
        *,
        sync: bool = True,
        resolved: Mapping[str, str] | None = None,
    ) -> _Effective:
        scopes = await self.chain(tenant, layer, layer_id, resolved)
        head = await self._knowledge.policy_version(tenant, sync=sync)
        key = (tenant, tuple(scopes))
        cached = self._cache.get(key)
        if cached is not None and cached.head == head:
            return cached
        items = await self._knowledge.items_at(tenant, scopes, KnowledgeType.POLICY, sync=sync)
        by_scope: dict[str, list[Policy]] = {scope: [] for scope in scopes}
        for item in items:
            by_scope.setdefault(item.scope, []).append(policy_of(item))
        layers = [(s, sorted(by_scope[s], key=lambda p: p.id)) for s in scopes]
        if self._settings.secret_scan:
            layers.insert(0, ("builtin", [secrets_policy()]))
        policies, notes = merge(layers)
        if len(self._cache) > 1024:
            self._cache.clear()
        found = self._cache[key] = _Effective(head, policies, notes)
        return found

    async def policies(
        self,
        layer: str | KnowledgeLayer = KnowledgeLayer.COMPANY,
        layer_id: str | None = None,
        *,
        tenant_id: str | None = None,
    ) -> list[Policy]:
        """The policies in force at the layer: accepted policy items from the company down
        to it, merged (and the built-in secrets policy when secret scanning is on)."""
        tenant = self._knowledge.tenant(tenant_id)
        where, where_id = check_layer(layer, layer_id)
        return (await self._effective(tenant, where, where_id)).policies

    async def validate(
        self,
        layer: str | KnowledgeLayer,
        context: Mapping[str, Any] | ValidationContext,
        layer_id: str | None = None,
        *,
        tenant_id: str | None = None,
    ) -> ValidationResult:
        """Evaluate the layer's merged policies against ``context`` (path, content,
        dependencies, imports, config). ``is_valid``: no block violation."""
        tenant = self._knowledge.tenant(tenant_id)
        where, where_id = check_layer(layer, layer_id)
        ctx = _context(context)
        self._check_size(ctx)
        effective = await self._effective(tenant, where, where_id)
        violations, applied = evaluate(effective.policies, ctx, effective.scanner())
        return ValidationResult(
            is_valid=not any(v.severity is Severity.BLOCK for v in violations),
            violations=violations,
            policies_applied=[p.id for p in effective.policies],
            rules_evaluated=applied,
            notes=effective.notes,
        )

    def _check_size(self, ctx: ValidationContext) -> None:
        if ctx.content is not None and len(ctx.content) > self._max_content * 16:
            limit = self._max_content * 16
            raise too_long("context.content", len(ctx.content), limit, field="context.content")

    async def drift(
        self,
        layer: str | KnowledgeLayer,
        contexts: Sequence[Mapping[str, Any] | ValidationContext],
        layer_id: str | None = None,
        *,
        tenant_id: str | None = None,
    ) -> DriftReport:
        """How far ``contexts`` (files, a project's dependencies…) drift from the layer's
        policies: the weight of the violations (block 1.0, warn 0.5, info 0.1) over the
        weight of every rule checked, in [0, 1]."""
        tenant = self._knowledge.tenant(tenant_id)
        where, where_id = check_layer(layer, layer_id)
        if isinstance(contexts, Mapping | ValidationContext) or not isinstance(contexts, Sequence):
            raise invalid("contexts must be a list of context objects", "contexts")
        if not 1 <= len(contexts) <= MAX_CONTEXTS:
            raise invalid(f"give 1 to {MAX_CONTEXTS} contexts", "contexts")
        parsed = [_context(c) for c in contexts]
        for ctx in parsed:
            self._check_size(ctx)
        effective = await self._effective(tenant, where, where_id)
        policies, scanner = effective.policies, effective.scanner()
        violations: list[Violation] = []
        possible = 0.0
        applied_total = 0
        for ctx in parsed:
            found, applied = evaluate(policies, ctx, scanner)
            violations.extend(found)
            applied_total += applied
            possible += _possible(policies, ctx)
        actual = sum(SEVERITY_WEIGHT[v.severity] for v in violations)
        counts = {s.value: sum(1 for v in violations if v.severity is s) for s in Severity}
        return DriftReport(
            layer=where.value,
            layer_id=where_id,
            score=round(min(1.0, actual / possible), 6) if possible else 0.0,
            contexts=len(parsed),
            rules_evaluated=applied_total,
            counts=counts,
            violations=violations,
        )

    # -- write checks -----------------------------------------------------------------------

    async def _guard(
        self,
        tenant: str,
        layer: KnowledgeLayer,
        layer_id: str | None,
        ctx: ValidationContext,
        *,
        sync: bool,
        resolved: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> list[Violation]:
        if not self._settings.secret_scan and not self._settings.check_writes:
            return []
        if self._settings.check_writes:
            effective = await self._effective(tenant, layer, layer_id, sync=sync, resolved=resolved)
        else:
            effective = self._secrets

        def scan() -> list[Violation]:
            found: list[Violation] = []
            views = dict(_texts(extra or {}))
            if ctx.content is not None:
                found = evaluate(effective.policies, ctx, effective.scanner())[0]
                views.update(("content", view) for view in secret_views(ctx.content)[1:])
            return found + self._secret_scan(views, {f"content/{v.rule_id}" for v in found})

        violations = await asyncio.to_thread(scan)
        _raise_blocking(violations)
        return violations

    def _secret_scan(self, fields: Mapping[str, str], known: set[str]) -> list[Violation]:
        """The built-in secret rules over each named text (and its views): the violations
        whose ``field/rule`` is not in ``known``, each naming its field."""
        if not self._settings.secret_scan:
            return []
        out: list[Violation] = []
        scanner = self._secrets.scanner()
        for name, text in fields.items():
            for view in secret_views(text):
                ctx = ValidationContext(content=view)
                for found in evaluate(self._secrets.policies, ctx, scanner)[0]:
                    key = f"{name}/{found.rule_id}"
                    if key in known:
                        continue
                    known.add(key)
                    out.append(
                        found.model_copy(update={"context": {**found.context, "field": name}})
                    )
        return out

    async def check_secrets(self, fields: Mapping[str, Any]) -> None:
        """Refuse (POLICY_VIOLATION) when any text in ``fields`` (strings, lists and objects
        of them, by name) holds a secret: what enters shared layers besides content (a commit
        message, for one)."""
        views = dict(_texts(fields))
        if views:
            _raise_blocking(await asyncio.to_thread(self._secret_scan, views, set()))

    async def check_knowledge_write(self, write: GuardedWrite) -> list[Violation]:
        """The guard of knowledge writes (the write lock is held: no index sync here)."""
        return await self._guard(
            write.tenant,
            write.layer,
            write.layer_id,
            ValidationContext(path=write.path, content=write.content),
            sync=False,
            extra=write.extra,
        )

    async def check_memory_write(
        self,
        tenant: str,
        layer: str,
        identifiers: Mapping[str, str],
        content: str | None,
        *,
        extra: Mapping[str, Any] | None = None,
    ) -> list[Violation]:
        """The guard of memory writes: shared layers only (project, team, org, company).
        ``identifiers``: the memory's identifiers after hierarchy resolution; ``content``
        None when only ``extra`` (metadata) changes: that is scanned for secrets."""
        where = SHARED_MEMORY_LAYERS.get(layer)
        if where is None:
            return []
        layer_id = None if where is KnowledgeLayer.COMPANY else identifiers.get(f"{layer}_id")
        if where is not KnowledgeLayer.COMPANY and not layer_id:
            return []
        return await self._guard(
            tenant,
            where,
            layer_id,
            ValidationContext() if content is None else ValidationContext(content=content),
            sync=True,
            resolved=identifiers,
            extra=extra,
        )


def _texts(value: Any, name: str = "") -> list[tuple[str, str]]:
    """Every string in ``value`` (and every key of its objects) with where it sits."""
    if isinstance(value, str):
        return [(name, value)]
    out: list[tuple[str, str]] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{name}.{key}" if name else str(key)
            if name:
                out.append((f"{where} (key)", str(key)))
            out.extend(_texts(item, where))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            out.extend(_texts(item, f"{name}[{i}]"))
    return out


def _raise_blocking(violations: Sequence[Violation]) -> None:
    blocking = [v for v in violations if v.severity is Severity.BLOCK]
    if blocking:
        raise LaminaError(
            ErrorCode.POLICY_VIOLATION,
            f"blocked by {len(blocking)} policy violation(s): "
            + "; ".join(
                f"{v.policy_id}/{v.rule_id}: {v.message}"
                + (f" (in {v.context['field']})" if "field" in v.context else "")
                for v in blocking[:5]
            ),
            details={"violations": [v.model_dump(mode="json") for v in violations]},
        )


def _possible(policies: Sequence[Policy], ctx: ValidationContext) -> float:
    """The drift weight of violating every deny rule that applies to ``ctx``."""
    given = ctx.model_fields_set
    names = {"file": "path", "code": "content", "dependency": "dependencies", "import": "imports"}
    total = 0.0
    for policy in policies:
        for rule in policy.rules:
            if rule.type.value == "deny" and names.get(rule.target.value, "config") in given:
                total += SEVERITY_WEIGHT[rule.severity]
    return total
