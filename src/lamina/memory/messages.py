"""Conversations in, without an LLM: ``add_messages`` stores each message of a conversation as
one memory, its content verbatim, with its speaker, its time and its place in the
conversation under the reserved metadata key ``conversation``::

    metadata["conversation"] = {"id": ..., "position": 0, "speaker": "Caroline",
                                "role": "user", "timestamp": "2023-05-08T13:56:00+00:00"}

Positions count from 0 and continue across calls for the same conversation id. Every
message of a call (of every conversation of ``add_messages_bulk``) is checked before
anything is written, embedded in batches, and stored in one transaction: all or none.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, TypeVar, Unpack

from pydantic import ValidationError

from lamina.checks import (
    MAX_ID_LENGTH,
    check_actor,
    check_content,
    check_flag,
    check_key,
    check_metadata,
    first_error,
    invalid,
)
from lamina.config import IdentifierFields
from lamina.embeddings.base import Vector
from lamina.errors import LaminaError
from lamina.memory.base import MemoryPart, MemoryShared, observed
from lamina.memory.hierarchy import Hierarchy
from lamina.memory.layers import (
    IDENTIFIER_NAMES,
    IdentifierArgs,
    Identifiers,
    MemoryLayer,
    identifier_args,
    layer_for,
    parse_layer,
    scope_for,
    scope_key,
)
from lamina.memory.models import AddedMessages, FactOutcome, MemoryEntry
from lamina.memory.ports import MemoryPorts, NewMemory, Scope
from lamina.memory.timing import Lifetime, parse_time
from lamina.memory.writes import (
    CONVERSATION_KEY,
    check_unreserved,
    flagged_entry,
    write_lifetime,
)

#: The most messages one call stores (all conversations of a bulk call together).
MAX_MESSAGES = 10_000
#: Messages embedded per embedder call (progress is reported after each batch).
EMBED_BATCH = 256
_MESSAGE_KEYS = ("role", "content", "name", "timestamp", "metadata")

#: ``on_progress(done, total)``: messages embedded so far, out of all.
OnProgress = Callable[[int, int | None], None]

T = TypeVar("T")


class MessageRole(StrEnum):
    """Who said a message, as chat APIs name it."""

    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


class ConversationInput(IdentifierFields):
    """One conversation for ``add_messages_bulk``: its messages, the identifiers, and
    optionally layer, conversation_id and metadata (as ``add_messages`` takes them; unknown
    keys refused)."""

    messages: list[Any]
    layer: str | None = None
    conversation_id: str | None = None
    metadata: dict[str, Any] | None = None
    ttl: Any = None


@dataclass(frozen=True)
class Message:
    """A checked message: ``timestamp`` is ISO-8601 in UTC."""

    content: str
    role: MessageRole
    speaker: str
    timestamp: str
    metadata: dict[str, Any]


def _at(where: str, exc: LaminaError, field: str, **details: Any) -> LaminaError:
    """``exc`` (keeping its code) with its message and ``details["field"]`` naming ``field``."""
    return LaminaError(
        exc.code,
        f"{where}: {exc.message}",
        details={**exc.details, **details, "field": field},
    )


def check_conversation_metadata(metadata: object, field: str) -> dict[str, Any]:
    """Caller metadata: as ``add`` checks it, without the reserved key."""
    try:
        meta = check_metadata(metadata)
    except LaminaError as exc:
        raise _at(field, exc, field) from None
    check_unreserved(meta, field)
    return meta


def parse_timestamp(value: object, field: str, now: datetime) -> str:
    """An ISO-8601 string (or a datetime) as ISO-8601 in UTC; naive times are UTC; None is
    ``now``."""
    return (parse_time(value, field) or now).isoformat()


def parse_message(
    value: object, index: int, *, where: str, max_length: int, now: datetime
) -> Message:
    """One message, checked; errors name ``where[index].field`` and carry ``index``."""
    at = f"{where}[{index}]"
    if not isinstance(value, Mapping):
        raise invalid(
            f"{at}: a message must be an object, got {type(value).__name__}", at, index=index
        )
    unknown = sorted(str(k) for k in value if k not in _MESSAGE_KEYS)
    if unknown:
        raise invalid(
            f"{at}.{unknown[0]}: unknown key (a message has {', '.join(_MESSAGE_KEYS)})",
            f"{at}.{unknown[0]}",
            index=index,
        )
    role = value.get("role")
    if role not in {r.value for r in MessageRole}:
        valid = [r.value for r in MessageRole]
        shown = role if isinstance(role, str | None) else type(role).__name__
        raise invalid(
            f"{at}.role: {shown!r} is not one of {', '.join(valid)}",
            f"{at}.role",
            index=index,
            valid=valid,
        )
    try:
        content = check_content(value.get("content"), max_length)
    except LaminaError as exc:
        raise _at(f"{at}.content", exc, f"{at}.content", index=index) from None
    name = value.get("name")
    if name is not None:
        try:
            name = check_key("name", name, max_length=MAX_ID_LENGTH)
        except LaminaError as exc:
            raise _at(f"{at}.name", exc, f"{at}.name", index=index) from None
    try:
        timestamp = parse_timestamp(value.get("timestamp"), f"{at}.timestamp", now)
        metadata = check_conversation_metadata(value.get("metadata"), f"{at}.metadata")
    except LaminaError as exc:
        raise LaminaError(exc.code, exc.message, details={**exc.details, "index": index}) from None
    return Message(content, MessageRole(role), name or str(role), timestamp, metadata)


def parse_messages(
    messages: object, *, where: str, max_length: int, now: datetime, room: int
) -> list[Message]:
    """A non-empty list of at most ``room`` messages, each checked."""
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise invalid(f"{where} must be a list of messages", where)
    if not messages:
        raise invalid(f"{where} is empty: give at least one message", where)
    if len(messages) > room:
        raise invalid(
            f"{where}: at most {MAX_MESSAGES} messages per call (split the conversation into "
            "several calls: positions continue)",
            where,
            max_messages=MAX_MESSAGES,
        )
    return [
        parse_message(m, i, where=where, max_length=max_length, now=now)
        for i, m in enumerate(messages)
    ]


def _merge(base: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """The call's metadata under the message's (which wins key by key; tags are joined)."""
    merged = {**base, **own}
    if "tags" in base and "tags" in own:
        merged["tags"] = list(dict.fromkeys([*base["tags"], *own["tags"]]))
    return merged


@dataclass
class Plan:
    """One conversation of a call, checked, ready to be numbered and stored."""

    layer: MemoryLayer
    scope: Scope
    resolved: dict[str, str]
    conversation_id: str | None
    messages: list[Message]
    metadata: dict[str, Any]
    where: str
    #: The time fields every message gets (its own timestamp is its event time).
    lifetime: Lifetime = dataclasses.field(default_factory=Lifetime)
    start: int = 0


@dataclass(frozen=True)
class Prepared:
    """Every message of a call checked, governed and embedded, ready to store: the plans, the
    memories (in plan order) and the non-blocking policy violations by memory id."""

    plans: list[Plan]
    memories: list[NewMemory]
    flagged: dict[str, list[dict[str, Any]]]


#: ``infer=True``: the prepared messages of a call consolidated and stored with the facts
#: (``lamina.memory.consolidation``: tenant, prepared, actor).
Consolidate = Callable[[str, Prepared, str | None], Awaitable[list[AddedMessages]]]


class MessageWrites(MemoryPart):
    """``add_messages``, ``add_messages_bulk``, and ``add_inferred`` (``add(...,
    infer=True)``). Holds the writes and embeddings ports, the hierarchy (scopes) and the
    consolidation's ``consolidate`` (``infer=True``)."""

    def __init__(
        self,
        shared: MemoryShared,
        ports: MemoryPorts,
        *,
        hierarchy: Hierarchy,
        consolidate: Consolidate,
    ) -> None:
        super().__init__(shared)
        self._writes = ports.writes
        self._embeddings = ports.embeddings
        self._hierarchy = hierarchy
        self._consolidate_messages = consolidate

    @observed("add_messages")
    async def add_messages(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        layer: str | MemoryLayer | None = None,
        conversation_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        infer: bool = False,
        actor: str | None = None,
        tenant_id: str | None = None,
        on_progress: OnProgress | None = None,
        ttl: float | timedelta | None = None,
        **scope_ids: Unpack[IdentifierArgs],
    ) -> AddedMessages:
        """Store each message (``{"role", "content", "name"?, "timestamp"?, "metadata"?}``)
        as one memory, content verbatim; see docs/memory.md.

        ``layer``: None infers the most specific layer the identifiers reach (``layer_for``).
        ``conversation_id``: None starts a new conversation (its id is returned); a known one
        continues its positions. ``metadata`` goes on every message's memory (a message's own
        metadata wins key by key). ``ttl``: seconds the messages live (session layer
        default: ``memory.session_ttl``); each message's timestamp is its event time.
        ``infer=True``: the chat model also extracts facts and consolidates them with what
        the scope holds (ADD, UPDATE, DELETE, NOOP: ``facts`` of the result; see
        docs/memory.md, "Consolidation"); the messages are stored verbatim either way.
        ``on_progress(done, total)`` follows the embedding batches."""
        ids = identifier_args(scope_ids)
        conversation = {
            **ids,
            "messages": messages,
            "layer": layer,
            "conversation_id": conversation_id,
            "metadata": metadata,
            "ttl": ttl,
        }

        return (
            await self._add_conversations(
                tenant_id, [conversation], infer, actor, on_progress, single=True
            )
        )[0]

    @observed("add_messages_bulk")
    async def add_messages_bulk(
        self,
        conversations: Sequence[ConversationInput | Mapping[str, Any]],
        *,
        infer: bool = False,
        actor: str | None = None,
        tenant_id: str | None = None,
        on_progress: OnProgress | None = None,
    ) -> list[AddedMessages]:
        """Store several conversations (each as ``add_messages`` takes it: ``messages``, the
        identifiers, ``layer``, ``conversation_id``, ``metadata``, ``ttl``) in one
        transaction: all are stored or none (with ``infer=True``, their facts too). One
        result per conversation, in order."""
        items: list[Mapping[str, Any]] = []
        for i, item in enumerate(conversations):
            if isinstance(item, ConversationInput):
                items.append(item.model_dump())
                continue
            try:
                items.append(ConversationInput.model_validate(item).model_dump())
            except ValidationError as exc:
                where, message = first_error(exc)
                raise invalid(
                    f"conversations[{i}]: {message} at {where}",
                    f"conversations[{i}].{where}" if where else f"conversations[{i}]",
                    conversation=i,
                ) from None
        return await self._add_conversations(tenant_id, items, infer, actor, on_progress)

    async def _add_conversations(
        self,
        tenant_id: str | None,
        conversations: Sequence[Mapping[str, Any]],
        infer: bool,
        actor: str | None,
        on_progress: OnProgress | None,
        *,
        single: bool = False,
    ) -> list[AddedMessages]:
        tenant = self._tenant(tenant_id)
        inferring = check_flag("infer", infer)
        who = check_actor(actor)
        if not conversations:
            return []
        prepared = await self._messages_of(tenant, conversations, single, on_progress)
        if inferring:
            return await self._consolidate_messages(tenant, prepared, who)
        entries = await self._retry.run(
            "add_messages", lambda: self._writes.add_messages(prepared.memories, actor=who)
        )
        return results_of(prepared.plans, entries, prepared.flagged)

    async def add_inferred(
        self,
        content: object,
        conversation: dict[str, Any],
        actor: str | None,
        tenant_id: str | None,
    ) -> MemoryEntry:
        """``add(..., infer=True)``: the content is stored verbatim as a one-message
        conversation (said by the user) and consolidated; returns that memory with the
        facts' outcomes."""
        message = {"role": "user", "content": content}
        if conversation.get("timestamp") is not None:
            message["timestamp"] = conversation["timestamp"]
        conv = {k: v for k, v in conversation.items() if k != "timestamp"}
        added = await self._add_conversations(
            tenant_id, [{**conv, "messages": [message]}], True, actor, None, single=True
        )
        return added[0].memories[0].model_copy(update={"facts": added[0].facts})

    async def _messages_of(
        self,
        tenant: str,
        conversations: Sequence[Mapping[str, Any]],
        single: bool,
        on_progress: OnProgress | None,
    ) -> Prepared:
        """The call's messages, prepared (all checked before anything is embedded)."""
        now = datetime.now(UTC)
        plans: list[Plan] = []
        room = MAX_MESSAGES
        for i, conv in enumerate(conversations):
            plan = await self._plan(
                tenant, conv, "" if single else f"conversations[{i}].", now, room
            )
            room -= len(plan.messages)
            plans.append(plan)
        _number(plans)
        new: list[NewMemory] = []
        flagged: dict[str, list[dict[str, Any]]] = {}
        for plan in plans:
            for offset, message in enumerate(plan.messages):
                mid = str(uuid.uuid4())
                if self._write_guard is not None:
                    found = await self._write_guard(
                        tenant,
                        plan.layer.value,
                        plan.resolved,
                        message.content,
                        extra={"metadata": _merge(plan.metadata, message.metadata)},
                    )
                    if found:
                        flagged[mid] = found
                meta = {
                    **_merge(plan.metadata, message.metadata),
                    CONVERSATION_KEY: {
                        "id": plan.conversation_id,
                        # Relative to the call; the store sets the position in the insert's
                        # transaction (concurrent calls on one conversation never collide).
                        "position": plan.start + offset,
                        "speaker": message.speaker,
                        "role": message.role.value,
                        "timestamp": message.timestamp,
                    },
                }
                try:
                    meta = check_metadata(meta)
                except LaminaError as exc:
                    field = f"{plan.where}messages[{offset}].metadata"
                    raise _at(field, exc, field, index=offset) from None
                life = dataclasses.replace(
                    plan.lifetime, event_at=datetime.fromisoformat(message.timestamp)
                )
                new.append(
                    NewMemory(mid, tenant, plan.scope, message.content, meta, None, lifetime=life)
                )
        return Prepared(plans, await self._embed_all(tenant, new, on_progress), flagged)

    async def _plan(
        self, tenant: str, conv: Mapping[str, Any], where: str, now: datetime, room: int
    ) -> Plan:
        ids = Identifiers(**{n: conv.get(n) for n in IDENTIFIER_NAMES})
        given = conv.get("layer")
        mem_layer = layer_for(ids) if given is None else parse_layer(given)
        resolved = await self._hierarchy.resolve(tenant, ids)
        scope = scope_for(mem_layer, resolved)
        cid = conv.get("conversation_id")
        if cid is not None:
            cid = check_key(f"{where}conversation_id", cid, strip=False, max_length=MAX_ID_LENGTH)
        metadata = check_conversation_metadata(conv.get("metadata"), f"{where}metadata")
        messages = parse_messages(
            conv.get("messages"),
            where=f"{where}messages",
            max_length=self._settings.max_content_length,
            now=now,
            room=room,
        )
        try:
            lifetime = write_lifetime(self._settings, mem_layer, {"ttl": conv.get("ttl")})
        except LaminaError as exc:
            raise _at(f"{where}ttl", exc, f"{where}ttl") from None
        return Plan(
            mem_layer,
            Scope(mem_layer, scope, scope_key(mem_layer, scope)),
            resolved.given(),
            cid,
            messages,
            metadata,
            where,
            lifetime,
        )

    def _embed_of(self, tenant: str, texts: list[str]) -> Callable[[], Awaitable[Vector]]:
        return lambda: self._embeddings.generate_embedding(tenant, texts)

    async def _embed_all(
        self, tenant: str, new: list[NewMemory], on_progress: OnProgress | None
    ) -> list[NewMemory]:
        out: list[NewMemory] = []
        for start in range(0, len(new), EMBED_BATCH):
            batch = new[start : start + EMBED_BATCH]
            texts = [m.content for m in batch]
            vectors = await self._retry.run("embed", self._embed_of(tenant, texts))
            out += [dataclasses.replace(m, embedding=vectors[i]) for i, m in enumerate(batch)]
            if on_progress is not None:
                on_progress(len(out), len(new))
        return out


def _number(plans: Sequence[Plan]) -> None:
    """Give each new conversation its id, and each plan its first position relative to the
    call (after earlier plans of the same conversation); the store adds where the
    conversation stands when it writes them."""
    nxt: dict[str, int] = {}
    for plan in plans:
        if plan.conversation_id is None:
            plan.conversation_id = str(uuid.uuid4())
        cid = plan.conversation_id
        plan.start = nxt.get(cid, 0)
        nxt[cid] = plan.start + len(plan.messages)


def per_plan(plans: Sequence[Plan], items: Sequence[T]) -> Iterator[tuple[Plan, Sequence[T]]]:
    """Each plan with its share of ``items``: one item per message, in plan order."""
    taken = 0
    for plan in plans:
        yield plan, items[taken : taken + len(plan.messages)]
        taken += len(plan.messages)


def results_of(
    plans: Sequence[Plan],
    entries: Sequence[MemoryEntry],
    flagged: Mapping[str, list[dict[str, Any]]],
    facts: Sequence[list[FactOutcome]] | None = None,
) -> list[AddedMessages]:
    """One result per plan: its messages' entries (in order) and, when inferred, its facts."""
    out: list[AddedMessages] = []
    for i, (plan, mine) in enumerate(per_plan(plans, entries)):
        out.append(
            AddedMessages(
                conversation_id=plan.conversation_id or "",
                layer=plan.layer,
                memories=[flagged_entry(e, flagged) for e in mine],
                facts=None if facts is None else facts[i],
            )
        )
    return out
