"""``ms.knowledge``: the git-backed knowledge repository. Every change is one commit with its
author and message; reads come from git, searches from the index in the database."""

from __future__ import annotations

import asyncio
import builtins
import difflib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from lamina.errors import ErrorCode, LaminaError
from lamina.governance.models import MergeStrategy, PolicyMode, Rule, Severity, Violation
from lamina.knowledge.document import (
    MANIFEST,
    FrontMatterError,
    check_id,
    check_layer,
    dump_yaml,
    is_item_path,
    item_path,
    parse,
    render,
)
from lamina.knowledge.gitstore import GitStore
from lamina.knowledge.index import KnowledgeIndex, filter_tag
from lamina.knowledge.models import (
    INITIAL_STATUSES,
    TRANSITIONS,
    HistoryEntry,
    KnowledgeChange,
    KnowledgeDiff,
    KnowledgeHit,
    KnowledgeItem,
    KnowledgeLayer,
    KnowledgePage,
    KnowledgeRecord,
    KnowledgeStatus,
    KnowledgeType,
)
from lamina.memory.layers import check_tenant
from lamina.memory.models import SearchMode
from lamina.memory.validation import check_query

if TYPE_CHECKING:
    from lamina.knowledge.promotion import Promotions

logger = logging.getLogger("lamina.knowledge")

MAX_TITLE = 300
MAX_SUMMARY = 2_000
MAX_LIST = 100
MAX_LIST_ITEM = 1_000
ANY_STATUS = "any"


class WriteGuard(Protocol):
    """Checks content about to enter a shared layer: raises POLICY_VIOLATION on a block and
    returns the violations that do not block."""

    async def __call__(
        self, tenant: str, layer: KnowledgeLayer, layer_id: str | None, path: str, content: str
    ) -> list[Violation]: ...


def _invalid(message: str, field_name: str) -> LaminaError:
    return LaminaError(ErrorCode.INVALID_ARGUMENT, message, details={"field": field_name})


def _text(name: str, value: object, limit: int, *, required: bool = False) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str) or "\x00" in value:
        raise _invalid(f"{name} must be a string without NUL characters", name)
    if required and not value.strip():
        raise _invalid(f"{name} must not be empty", name)
    if len(value) > limit:
        raise LaminaError(
            ErrorCode.CONTENT_TOO_LONG,
            f"{name} is {len(value)} characters; the maximum is {limit}",
            details={"field": name, "max_length": limit},
        )
    return value.strip() if name in ("title", "summary") else value


def _strings(name: str, value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise _invalid(f"{name} must be a list of strings", name)
    if len(value) > MAX_LIST or not all(
        isinstance(v, str) and v.strip() and len(v) <= MAX_LIST_ITEM and "\x00" not in v
        for v in value
    ):
        raise _invalid(
            f"{name} must be at most {MAX_LIST} non-empty strings of at most "
            f"{MAX_LIST_ITEM} characters",
            name,
        )
    return list(dict.fromkeys(v.strip() for v in value))


def _choice(name: str, value: object, enum: type[Any]) -> Any:
    try:
        return enum(value)
    except ValueError:
        valid = [v.value for v in enum]
        raise LaminaError(
            ErrorCode.INVALID_ARGUMENT,
            f"{name} {value!r} is not one of {', '.join(valid)}",
            details={"field": name, "valid": valid},
        ) from None


def _author(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise _invalid("author must be a non-empty string of at most 200 characters", "author")
    if any(c in value for c in "\n\r\x00"):
        raise _invalid("author must be one line", "author")
    return value.strip()


def _rules(value: object) -> list[Rule]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _invalid("rules must be a list of rule objects", "rules")
    out = []
    for i, raw in enumerate(value):
        if isinstance(raw, Rule):
            out.append(raw)
            continue
        try:
            out.append(Rule.model_validate(raw))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise _invalid(
                f"rules[{i}]{'.' + where if where else ''}: {first['msg']}", "rules"
            ) from None
    ids = [r.id for r in out]
    if len(set(ids)) != len(ids):
        raise _invalid("rule ids must be unique within a policy", "rules")
    return out


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


@dataclass
class Plan:
    """What one write commits: files (None deletes), the message, and what to return."""

    files: dict[str, bytes | None]
    message: str
    items: list[KnowledgeItem] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    result: Any = None
    #: Generated ids: the last number used per type.
    counters: dict[str, int] = field(default_factory=dict)


Mutation = Callable[[str | None], Awaitable[Plan]]


class KnowledgeService:
    def __init__(
        self,
        git: GitStore,
        index: KnowledgeIndex,
        *,
        default_tenant: str,
        ready: Callable[[], Awaitable[None]],
        max_content_length: int,
        max_query_length: int,
        max_limit: int,
        search_mode: SearchMode,
    ) -> None:
        self.git = git
        self.index = index
        self._default_tenant = default_tenant
        self._ready = ready
        self._max_content = max_content_length
        self._max_query = max_query_length
        self._max_limit = max_limit
        self._search_mode = search_mode
        self._locks: dict[str, asyncio.Lock] = {}
        self._synced: dict[str, str] = {}
        self._policy_versions: dict[str, tuple[str | None, Any]] = {}
        #: Set by the runtime: governance of writes (secrets, policies).
        self.guard: WriteGuard | None = None
        #: ``ms.knowledge.promotions``: set by the runtime.
        self.promotions: Promotions

    def tenant(self, tenant_id: str | None) -> str:
        return check_tenant(self._default_tenant if tenant_id is None else tenant_id)

    def _lock(self, tenant: str) -> asyncio.Lock:
        return self._locks.setdefault(tenant, asyncio.Lock())

    # -- index ------------------------------------------------------------------------------

    async def head(self, tenant_id: str | None = None) -> str | None:
        """The commit the tenant's repository is at (None before its first change)."""
        tenant = self.tenant(tenant_id)
        return await asyncio.to_thread(self.git.head, tenant)

    async def _ensure_synced(self, tenant: str) -> str | None:
        await self._ready()
        head = await asyncio.to_thread(self.git.head, tenant)
        if head is None or self._synced.get(tenant) == head:
            return head
        async with self._lock(tenant):
            head = await asyncio.to_thread(self.git.head, tenant)
            if head is not None and self._synced.get(tenant) != head:
                await self._sync_to(tenant, head)
        return head

    async def _sync_to(self, tenant: str, head: str, *, full: bool = False) -> dict[str, Any]:
        state = await self.index.state(tenant)
        indexed = None if full or state is None else state.get("commit")
        if indexed == head:
            self._synced[tenant] = head
            return {"commit": head, "indexed": 0, "removed": 0, "full": False}
        invalid: dict[str, dict[str, Any]] = {
            e["path"]: e for e in (state or {}).get("invalid", []) if not full
        }
        changed: dict[str, str | None]
        if indexed is not None:
            try:
                changed = await asyncio.to_thread(self.git.changes, tenant, indexed, head)
            except LaminaError:
                indexed = None  # the indexed commit is gone (history rewritten): rebuild
        if indexed is None:
            changed = dict(await asyncio.to_thread(self.git.files, tenant, head))
        items: list[KnowledgeItem] = []
        removed: list[str] = []
        for path, blob in changed.items():
            if not is_item_path(path):
                continue
            invalid.pop(path, None)
            if blob is None:
                removed.append(path.rsplit("/", 1)[1][:-3])
                continue
            data = await asyncio.to_thread(self.git.blob, tenant, blob)
            try:
                items.append(parse(path, data, head))
            except FrontMatterError as exc:
                logger.warning("knowledge file skipped by the index: %s", exc.message)
                invalid[path] = {"path": path, **exc.details, "message": exc.message}
                removed.append(path.rsplit("/", 1)[1][:-3])
        if indexed is None:
            present = {i.id for i in items}
            removed = sorted((await self.index.all_ids(tenant)) - present)
        for item_id in removed:
            await self.index.remove(tenant, item_id)
        await self.index.put(tenant, items)
        policies_changed = indexed is None or any("/policies/" in p for p in changed)
        await self.index.set_state(
            tenant,
            {
                **(state or {}),
                "commit": head,
                "invalid": sorted(invalid.values(), key=lambda e: e["path"]),
                "policies": head if policies_changed else (state or {}).get("policies"),
            },
        )
        self._synced[tenant] = head
        logger.info(
            "knowledge index of %s at %s: %d indexed, %d removed%s",
            tenant,
            head[:12],
            len(items),
            len(removed),
            " (full rebuild)" if indexed is None else "",
        )
        return {
            "commit": head,
            "indexed": len(items),
            "removed": len(removed),
            "full": indexed is None,
        }

    async def sync(self, *, tenant_id: str | None = None) -> dict[str, Any]:
        """Bring the search index up to the repository's head (changes since the commit it
        reflects); reads do this on their own when the index is behind."""
        tenant = self.tenant(tenant_id)
        await self._ready()
        async with self._lock(tenant):
            head = await asyncio.to_thread(self.git.head, tenant)
            if head is None:
                return {"commit": None, "indexed": 0, "removed": 0, "full": False}
            return await self._sync_to(tenant, head)

    async def rebuild(self, *, tenant_id: str | None = None) -> dict[str, Any]:
        """Rebuild the whole search index from the repository's head."""
        tenant = self.tenant(tenant_id)
        await self._ready()
        async with self._lock(tenant):
            head = await asyncio.to_thread(self.git.head, tenant)
            if head is None:
                for item_id in await self.index.all_ids(tenant):
                    await self.index.remove(tenant, item_id)
                return {"commit": None, "indexed": 0, "removed": 0, "full": True}
            return await self._sync_to(tenant, head, full=True)

    # -- writes -----------------------------------------------------------------------------

    async def _write(self, tenant: str, author: str, mutate: Mutation) -> tuple[Plan, str]:
        """Run ``mutate`` on the current head under the tenant's write lock and commit its
        plan; the index follows the commit before the lock is released."""
        await self._ready()
        async with self._lock(tenant):
            handle = await asyncio.to_thread(self.git.acquire, tenant)
            try:
                head = await asyncio.to_thread(self.git.head, tenant)
                if head is not None and self._synced.get(tenant) != head:
                    await self._sync_to(tenant, head)
                plan = await mutate(head)
                files = dict(plan.files)
                if head is None:
                    files[MANIFEST] = self._manifest(tenant)
                commit = await asyncio.to_thread(
                    self.git.commit, tenant, head, files, message=plan.message, author=author
                )
                for item_id in plan.removed:
                    await self.index.remove(tenant, item_id)
                stamped = [i.model_copy(update={"commit": commit}) for i in plan.items]
                await self.index.put(tenant, stamped)
                state = dict(await self.index.state(tenant) or {})
                state["commit"] = commit
                if any("/policies/" in p for p in files):
                    state["policies"] = commit
                if plan.counters:
                    state["counters"] = {**state.get("counters", {}), **plan.counters}
                await self.index.set_state(tenant, state)
                self._synced[tenant] = commit
                plan.items = stamped
                return plan, commit
            finally:
                await asyncio.to_thread(self.git.release, handle)

    def _manifest(self, tenant: str) -> bytes:
        return dump_yaml(
            {
                "format": 1,
                "kind": "lamina-knowledge",
                "tenant": tenant,
                "layers": {
                    "company": "company/",
                    "org": "orgs/<org_id>/",
                    "team": "teams/<team_id>/",
                    "project": "projects/<project_id>/",
                },
                "types": {
                    "adr": "adrs/",
                    "policy": "policies/",
                    "pattern": "patterns/",
                    "spec": "specs/",
                },
                "item": "<layer dir>/<type dir>/<id>.md: Markdown with YAML front matter",
                "promotions": "promotions/<id>.yaml",
            }
        )

    async def _check(self, tenant: str, item: KnowledgeItem) -> list[Violation]:
        if self.guard is None:
            return []
        text = "\n".join([item.title, item.summary, *item.constraints, item.body])
        return await self.guard(tenant, item.layer, item.layer_id, item.path, text)

    async def _current(self, tenant: str, head: str | None, item_id: str) -> KnowledgeItem:
        """The item at ``head`` (the index is in step with head under the write lock)."""
        found = await self.index.lookup(tenant, item_id)
        if found is None or head is None:
            raise self._not_found(tenant, item_id)
        data = await asyncio.to_thread(self.git.read, tenant, found.path, head)
        if data is None:
            raise self._not_found(tenant, item_id)
        return parse(found.path, data, head)

    @staticmethod
    def _not_found(tenant: str, item_id: str) -> LaminaError:
        return LaminaError(
            ErrorCode.ITEM_NOT_FOUND,
            f"no knowledge item {item_id!r} in tenant {tenant!r}",
            details={"id": item_id},
        )

    async def create(
        self,
        type: str | KnowledgeType,
        title: str,
        *,
        layer: str | KnowledgeLayer,
        layer_id: str | None = None,
        id: str | None = None,
        summary: str | None = None,
        body: str | None = None,
        status: str | KnowledgeStatus = KnowledgeStatus.DRAFT,
        severity: str | Severity = Severity.INFO,
        tags: Sequence[str] | None = None,
        constraints: Sequence[str] | None = None,
        authors: Sequence[str] | None = None,
        related: Sequence[str] | None = None,
        supersedes: Sequence[str] | None = None,
        policy_id: str | None = None,
        mode: str | PolicyMode | None = None,
        merge_strategy: str | MergeStrategy | None = None,
        rules: Sequence[Any] | None = None,
        author: str = "lamina",
        message: str | None = None,
        tenant_id: str | None = None,
    ) -> KnowledgeChange:
        """Add an item (one commit). ``id`` defaults to ``<type>-<n>``, the next free number.
        An item starts as draft (or proposed / accepted when review happened elsewhere)."""
        tenant = self.tenant(tenant_id)
        kind = _choice("type", type, KnowledgeType)
        where, where_id = check_layer(layer, layer_id)
        start = _choice("status", status, KnowledgeStatus)
        if start not in INITIAL_STATUSES:
            raise LaminaError(
                ErrorCode.INVALID_TRANSITION,
                f"an item starts as draft, proposed or accepted, not {start.value}",
                details={"status": start.value},
            )
        who = _author(author)
        stamp = now()
        fields = {
            **self._content(
                title="" if title is None else title,
                summary=summary or "",
                body=body or "",
                severity=severity,
                tags=tags or [],
                constraints=constraints or [],
                authors=authors or [],
                related=related or [],
                supersedes=supersedes or [],
            ),
            **self._policy_fields(kind, policy_id, mode, merge_strategy, rules),
        }
        fields["authors"] = fields["authors"] or [who]
        wanted = None if id is None else check_id("id", id)
        note = _text("message", message, 2_000) if message is not None else None

        async def mutate(head: str | None) -> Plan:
            counters: dict[str, int] = {}
            if wanted:
                item_id = wanted
            else:
                number = await self._next_number(tenant, kind)
                item_id = f"{kind.value}-{number:04d}"
                counters[kind.value] = number
            if await self.index.lookup(tenant, item_id) is not None:
                raise LaminaError(
                    ErrorCode.ITEM_EXISTS,
                    f"knowledge item {item_id!r} already exists in tenant {tenant!r}",
                    details={"id": item_id},
                )
            item = KnowledgeItem(
                id=item_id,
                type=kind,
                layer=where,
                layer_id=where_id,
                status=start,
                created=stamp,
                updated=stamp,
                path=item_path(kind, where, where_id, item_id),
                **fields,
            )
            violations = await self._check(tenant, item)
            return Plan(
                {item.path: render(item)},
                note or f"Create {kind.value} {item_id}: {item.title}",
                items=[item],
                violations=violations,
                counters=counters,
            )

        plan, commit = await self._write(tenant, who, mutate)
        return KnowledgeChange(item=plan.items[0], commit=commit, violations=plan.violations)

    def _content(self, **given: Any) -> dict[str, Any]:
        """The content fields given (None: not given), each checked."""
        checks: dict[str, Callable[[Any], Any]] = {
            "title": lambda v: _text("title", v, MAX_TITLE, required=True),
            "summary": lambda v: _text("summary", v, MAX_SUMMARY),
            "body": lambda v: _text("body", v, self._max_content),
            "severity": lambda v: _choice("severity", v, Severity),
            "tags": lambda v: _strings("tags", v),
            "constraints": lambda v: _strings("constraints", v),
            "authors": lambda v: _strings("authors", v),
            "related": lambda v: [check_id("related", r) for r in _strings("related", v)],
            "supersedes": lambda v: [check_id("supersedes", r) for r in _strings("supersedes", v)],
        }
        return {name: checks[name](value) for name, value in given.items() if value is not None}

    @staticmethod
    def _policy_fields(
        kind: KnowledgeType,
        policy_id: object,
        mode: object,
        merge_strategy: object,
        rules: object,
    ) -> dict[str, Any]:
        if kind is not KnowledgeType.POLICY:
            if policy_id is not None or mode is not None or merge_strategy is not None or rules:
                raise _invalid(
                    "policy_id, mode, merge_strategy and rules belong to policies only", "type"
                )
            return {}
        return {
            "policy_id": None if policy_id is None else check_id("policy_id", policy_id),
            "mode": _choice("mode", mode or PolicyMode.OPTIONAL, PolicyMode),
            "merge_strategy": _choice(
                "merge_strategy", merge_strategy or MergeStrategy.MERGE, MergeStrategy
            ),
            "rules": _rules(rules),
        }

    async def _next_number(self, tenant: str, kind: KnowledgeType) -> int:
        """The next free number for a generated ``<type>-<n>`` id (counted once, then kept
        in the index state)."""
        state = await self.index.state(tenant) or {}
        last = state.get("counters", {}).get(kind.value)
        if last is None:
            tag = filter_tag(kind.value, None, None, None)
            last = (await self.index.page(tenant, tag, 1, None))[2]
        n = int(last) + 1
        while await self.index.lookup(tenant, f"{kind.value}-{n:04d}") is not None:
            n += 1
        return n

    async def policy_version(self, tenant: str, *, sync: bool = True) -> str | None:
        """The last commit that changed a policy (what the merged policies depend on)."""
        head = await self._ensure_synced(tenant) if sync else self._synced.get(tenant)
        cached = self._policy_versions.get(tenant)
        if cached is not None and cached[0] == head:
            return str(cached[1]) if cached[1] is not None else None
        state = await self.index.state(tenant) or {}
        version = state.get("policies")
        self._policy_versions[tenant] = (state.get("commit"), version)
        return version if isinstance(version, str) else None

    async def update(
        self,
        id: str,
        *,
        title: str | None = None,
        summary: str | None = None,
        body: str | None = None,
        severity: str | Severity | None = None,
        tags: Sequence[str] | None = None,
        constraints: Sequence[str] | None = None,
        authors: Sequence[str] | None = None,
        related: Sequence[str] | None = None,
        policy_id: str | None = None,
        mode: str | PolicyMode | None = None,
        merge_strategy: str | MergeStrategy | None = None,
        rules: Sequence[Any] | None = None,
        author: str = "lamina",
        message: str | None = None,
        tenant_id: str | None = None,
    ) -> KnowledgeChange:
        """Change an item's content (one commit); the fields not given stay. Status changes
        go through ``set_status``."""
        tenant = self.tenant(tenant_id)
        item_id = check_id("id", id)
        who = _author(author)
        patch = self._content(
            title=title,
            summary=summary,
            body=body,
            severity=severity,
            tags=tags,
            constraints=constraints,
            authors=authors,
            related=related,
        )
        policy_patch = {
            k: v
            for k, v in (
                ("policy_id", policy_id),
                ("mode", mode),
                ("merge_strategy", merge_strategy),
                ("rules", rules),
            )
            if v is not None
        }
        if not patch and not policy_patch:
            raise _invalid("nothing to update: give at least one field", "fields")
        note = _text("message", message, 2_000) if message is not None else None

        async def mutate(head: str | None) -> Plan:
            current = await self._current(tenant, head, item_id)
            changes = dict(patch)
            if policy_patch:
                if current.type is not KnowledgeType.POLICY:
                    raise _invalid("mode, merge_strategy and rules belong to policies only", "type")
                changes.update(
                    self._policy_fields(
                        current.type,
                        policy_patch.get("policy_id", current.policy_id),
                        policy_patch.get("mode", current.mode),
                        policy_patch.get("merge_strategy", current.merge_strategy),
                        policy_patch.get("rules", current.rules),
                    )
                )
            if who not in current.authors and "authors" not in patch:
                changes["authors"] = [*current.authors, who]
            item = current.model_copy(update={**changes, "updated": now()})
            item = KnowledgeItem.model_validate(item.model_dump())
            violations = await self._check(tenant, item)
            return Plan(
                {item.path: render(item)},
                note or f"Update {item.type.value} {item.id}",
                items=[item],
                violations=violations,
            )

        plan, commit = await self._write(tenant, who, mutate)
        return KnowledgeChange(item=plan.items[0], commit=commit, violations=plan.violations)

    async def set_status(
        self,
        id: str,
        status: str | KnowledgeStatus,
        *,
        superseded_by: str | None = None,
        author: str = "lamina",
        message: str | None = None,
        tenant_id: str | None = None,
    ) -> KnowledgeChange:
        """Move an item along its lifecycle: draft → proposed | rejected; proposed → accepted
        | rejected; accepted → deprecated | superseded (naming the successor). Anything else
        is INVALID_TRANSITION."""
        tenant = self.tenant(tenant_id)
        item_id = check_id("id", id)
        target = _choice("status", status, KnowledgeStatus)
        successor = None if superseded_by is None else check_id("superseded_by", superseded_by)
        if successor is not None and target is not KnowledgeStatus.SUPERSEDED:
            raise _invalid("superseded_by goes with status superseded", "superseded_by")
        who = _author(author)
        note = _text("message", message, 2_000) if message is not None else None

        async def mutate(head: str | None) -> Plan:
            current = await self._current(tenant, head, item_id)
            check_transition(current, target)
            update: dict[str, Any] = {"status": target, "updated": now()}
            files: dict[str, bytes | None] = {}
            items = []
            if successor is not None:
                if successor == item_id:
                    raise _invalid("an item cannot supersede itself", "superseded_by")
                other = await self._current(tenant, head, successor)
                update["superseded_by"] = successor
                if item_id not in other.supersedes:
                    other = other.model_copy(
                        update={"supersedes": [*other.supersedes, item_id], "updated": now()}
                    )
                    files[other.path] = render(other)
                    items.append(other)
            item = current.model_copy(update=update)
            files[item.path] = render(item)
            return Plan(
                files,
                note or f"{item.type.value} {item.id}: {current.status.value} → {target.value}",
                items=[item, *items],
            )

        plan, commit = await self._write(tenant, who, mutate)
        return KnowledgeChange(item=plan.items[0], commit=commit)

    # -- reads ------------------------------------------------------------------------------

    async def get(
        self,
        id: str,
        *,
        history: bool = False,
        tenant_id: str | None = None,
    ) -> KnowledgeItem | KnowledgeRecord:
        """The item as it is at the repository's head; with ``history=True`` a
        KnowledgeRecord with the commits that changed it, newest first."""
        tenant = self.tenant(tenant_id)
        item_id = check_id("id", id)
        head = await self._ensure_synced(tenant)
        item = await self._current(tenant, head, item_id)
        if not history:
            return item
        return KnowledgeRecord(item=item, history=await self._history(tenant, item.path, 100))

    async def history(
        self,
        id: str,
        *,
        limit: int = 50,
        tenant_id: str | None = None,
    ) -> list[HistoryEntry]:
        """The commits that changed the item, newest first."""
        tenant = self.tenant(tenant_id)
        item_id = check_id("id", id)
        size = self._limit(limit, 50)
        head = await self._ensure_synced(tenant)
        item = await self._current(tenant, head, item_id)
        return await self._history(tenant, item.path, size)

    async def _history(self, tenant: str, path: str, limit: int) -> list[HistoryEntry]:
        log = await asyncio.to_thread(self.git.log, tenant, path, limit=limit)
        out = []
        for entry in log:
            status = None
            if entry.blob is not None:
                data = await asyncio.to_thread(self.git.blob, tenant, entry.blob)
                try:
                    status = parse(path, data).status
                except FrontMatterError:
                    status = None
            out.append(
                HistoryEntry(
                    commit=entry.sha,
                    author=entry.author,
                    message=entry.message,
                    timestamp=entry.timestamp,
                    status=status,
                    deleted=entry.blob is None,
                )
            )
        return out

    async def diff(
        self,
        id: str,
        *,
        from_commit: str | None = None,
        to_commit: str | None = None,
        tenant_id: str | None = None,
    ) -> KnowledgeDiff:
        """A unified diff of the item's file between two commits (default: its previous
        version and the head)."""
        tenant = self.tenant(tenant_id)
        item_id = check_id("id", id)
        head = await self._ensure_synced(tenant)
        item = await self._current(tenant, head, item_id)
        commits = [e.commit for e in await self._history(tenant, item.path, 2)]
        new = _commit_id("to_commit", to_commit) if to_commit else head
        old = (
            _commit_id("from_commit", from_commit)
            if from_commit
            else (commits[1] if len(commits) > 1 and new == head else None)
        )
        assert new is not None
        after = await self._read_at(tenant, item.path, new)
        before = b"" if old is None else await self._read_at(tenant, item.path, old)
        lines = difflib.unified_diff(
            before.decode().splitlines(keepends=True),
            after.decode().splitlines(keepends=True),
            fromfile=f"a/{item.path}" if old else "/dev/null",
            tofile=f"b/{item.path}",
        )
        return KnowledgeDiff(
            id=item_id, path=item.path, from_commit=old, to_commit=new, diff="".join(lines)
        )

    async def _read_at(self, tenant: str, path: str, commit: str) -> bytes:
        try:
            data = await asyncio.to_thread(self.git.read, tenant, path, commit)
        except LaminaError as exc:
            raise LaminaError(
                ErrorCode.INVALID_ARGUMENT,
                f"commit {commit} is not in the repository",
                details={"commit": commit},
            ) from exc
        return data or b""

    def _limit(self, limit: object, default: int) -> int:
        value = default if limit is None else limit
        if isinstance(value, bool) or not isinstance(value, int):
            raise _invalid("limit must be an integer", "limit")
        if not 1 <= value <= self._max_limit:
            raise _invalid(f"limit must be from 1 to {self._max_limit}", "limit")
        return value

    @staticmethod
    def _filters(
        type: object,
        layer: object,
        layer_id: object,
        status: object,
        tags: object,
    ) -> tuple[str | None, list[str]]:
        kind = None if type is None else _choice("type", type, KnowledgeType).value
        where = scope = None
        if layer is not None:
            parsed = _choice("layer", layer, KnowledgeLayer)
            if layer_id is not None and parsed is not KnowledgeLayer.COMPANY:
                scope = f"{parsed.value}/{check_id('layer_id', layer_id)}"
            else:
                where = parsed.value
                if parsed is KnowledgeLayer.COMPANY:
                    scope, where = "company", None
        elif layer_id is not None:
            raise _invalid("layer_id needs layer", "layer_id")
        state = (
            None
            if status is None or status == ANY_STATUS
            else _choice("status", status, KnowledgeStatus).value
        )
        return filter_tag(kind, state, where, scope), _strings("tags", tags)

    async def list(
        self,
        *,
        type: str | KnowledgeType | None = None,
        layer: str | KnowledgeLayer | None = None,
        layer_id: str | None = None,
        status: str | KnowledgeStatus | None = KnowledgeStatus.ACCEPTED,
        tags: Sequence[str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        tenant_id: str | None = None,
    ) -> KnowledgePage:
        """Items, oldest first, filtered by type, layer (and layer_id), status (default
        accepted; ``"any"`` or None for all) and tags (any of them)."""
        tenant = self.tenant(tenant_id)
        tag, wanted = self._filters(type, layer, layer_id, status, tags)
        size = self._limit(limit, 50)
        if cursor is not None and not isinstance(cursor, str):
            raise _invalid("cursor must be a string from next_cursor", "cursor")
        await self._ensure_synced(tenant)
        if not wanted:
            items, next_cursor, total = await self.index.page(tenant, tag, size, cursor)
            return KnowledgePage(items=items, next_cursor=next_cursor, total_count=total)
        # Tags filter after the index filter: read pages until the page is full.
        out: builtins.list[KnowledgeItem] = []
        while len(out) < size:
            items, cursor, _ = await self.index.page(tenant, tag, size - len(out), cursor)
            out.extend(i for i in items if set(i.tags) & set(wanted))
            if cursor is None:
                break
        total = await self._count(tenant, tag, wanted)
        return KnowledgePage(items=out, next_cursor=cursor, total_count=total)

    async def _count(self, tenant: str, tag: str | None, wanted: builtins.list[str]) -> int:
        total, cursor = 0, None
        while True:
            items, cursor, _ = await self.index.page(tenant, tag, 1000, cursor)
            total += sum(1 for i in items if set(i.tags) & set(wanted))
            if cursor is None:
                return total

    async def search(
        self,
        query: str,
        *,
        type: str | KnowledgeType | None = None,
        layer: str | KnowledgeLayer | None = None,
        layer_id: str | None = None,
        status: str | KnowledgeStatus | None = KnowledgeStatus.ACCEPTED,
        tags: Sequence[str] | None = None,
        limit: int | None = None,
        mode: str | SearchMode | None = None,
        min_score: float | None = None,
        tenant_id: str | None = None,
    ) -> builtins.list[KnowledgeHit]:
        """Best matches first (keyword, semantic or hybrid, as memory search), with the same
        filters as ``list``."""
        tenant = self.tenant(tenant_id)
        text = check_query(query, self._max_query)
        tag, wanted = self._filters(type, layer, layer_id, status, tags)
        size = self._limit(limit, 10)
        how = self._search_mode if mode is None else _choice("mode", mode, SearchMode)
        if min_score is not None and (
            isinstance(min_score, bool) or not isinstance(min_score, int | float)
        ):
            raise _invalid("min_score must be a number", "min_score")
        await self._ensure_synced(tenant)
        pool = min(self._max_limit, size * 5) if wanted else size
        hits = await self.index.search(tenant, text, tag=tag, mode=how, limit=pool)
        out = [
            KnowledgeHit(item=item, score=score)
            for item, score in hits
            if (not wanted or set(item.tags) & set(wanted))
            and (min_score is None or score >= min_score)
        ]
        return out[:size]

    async def items_at(
        self, tenant: str, scopes: Sequence[str], kind: KnowledgeType, *, sync: bool = True
    ) -> builtins.list[KnowledgeItem]:
        """Every accepted item of ``kind`` in the given scopes (``company``, ``team/<id>``…)."""
        if sync:
            await self._ensure_synced(tenant)
        out: builtins.list[KnowledgeItem] = []
        for scope in scopes:
            tag = filter_tag(kind.value, KnowledgeStatus.ACCEPTED.value, None, scope)
            cursor = None
            while True:
                items, cursor, _ = await self.index.page(tenant, tag, 1000, cursor)
                out.extend(items)
                if cursor is None:
                    break
        return out

    async def check(self, *, tenant_id: str | None = None) -> dict[str, Any]:
        """Health of the tenant's repository and of its index."""
        tenant = self.tenant(tenant_id)
        repo = await asyncio.to_thread(self.git.check, tenant)
        state = await self.index.state(tenant)
        if repo["status"] == "missing" and state is None:
            repo["status"] = "empty"  # nothing written yet: not a failure
        repo["indexed_commit"] = None if state is None else state.get("commit")
        repo["invalid_files"] = [] if state is None else state.get("invalid", [])
        repo["healthy"] = repo["status"] in ("ok", "empty")
        return repo


def check_transition(item: KnowledgeItem, target: KnowledgeStatus) -> None:
    allowed = TRANSITIONS[item.status]
    if target not in allowed:
        raise LaminaError(
            ErrorCode.INVALID_TRANSITION,
            f"{item.id} is {item.status.value}; it can move to "
            + (", ".join(sorted(s.value for s in allowed)) or "nothing")
            + f", not {target.value}",
            details={
                "id": item.id,
                "from": item.status.value,
                "to": target.value,
                "allowed": sorted(s.value for s in allowed),
            },
        )


def _commit_id(name: str, value: object) -> str:
    if (
        not isinstance(value, str)
        or len(value) != 40
        or any(c not in "0123456789abcdef" for c in value)
    ):
        raise _invalid(f"{name} must be a full 40-character commit id", name)
    return value
