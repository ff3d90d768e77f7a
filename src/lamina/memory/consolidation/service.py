"""Consolidation (``add_messages(..., infer=True)``, ``add(..., infer=True)``): the chat
model extracts facts from the messages, each fact is compared with the nearest stored
memories of its scope, and the model decides ADD, UPDATE, DELETE or NOOP (docs/memory.md,
"Consolidation").

Every model call happens before anything is written, through the shared retry policy (a
malformed answer is retried like a failed call). Then one transaction stores the messages
verbatim, adds, rewrites and invalidates: all or nothing. When a memory the model saw
changed meanwhile, the decisions are taken again (CONFLICT after a few tries).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any

from lamina.embeddings.base import Vector
from lamina.errors import ErrorCode, LaminaError
from lamina.llm.base import ChatModel, request
from lamina.memory.base import MemoryPart, MemoryShared
from lamina.memory.consolidation.answers import (
    Claims,
    Decision,
    Fact,
    parse_decisions,
    parse_facts,
    sources_of,
)
from lamina.memory.consolidation.batches import Line, batch_lines
from lamina.memory.consolidation.prompts import (
    DECIDE_SYSTEM,
    EXTRACT_SYSTEM,
    render_decision,
    render_messages,
    shown,
)
from lamina.memory.consolidation.stale import SOURCES_KEY, superseded
from lamina.memory.consolidation.steps import Extracted, Step
from lamina.memory.filters import MetadataFilter
from lamina.memory.messages import Plan, Prepared, per_plan, results_of
from lamina.memory.models import AddedMessages, FactEvent, FactOutcome, MemoryEntry, SearchMode
from lamina.memory.ports import (
    Consolidated,
    Consolidation,
    Invalidation,
    LayerSearch,
    MemoryPorts,
    NewMemory,
    Revision,
    ScoredMemory,
)
from lamina.memory.scoring import QuerySignals
from lamina.memory.timing import Lifetime, TimeWindow, now
from lamina.memory.writes import CONVERSATION_KEY
from lamina.text import analyze
from lamina.tokens import TokenCounter, batches, default_counter

#: Times the decisions are taken again when a memory changed while they were taken.
CONFLICT_ATTEMPTS = 3
#: Tokens the model may answer with.
ANSWER_TOKENS = 2_048


class _CallFailed(Exception):
    """A chat model call's failure, carried past the answer's retries unretried."""

    def __init__(self, error: LaminaError) -> None:
        super().__init__(error.message)
        self.error = error


class Consolidator(MemoryPart):
    """``infer=True`` for ``add_messages``, ``add_messages_bulk`` and ``add``: ``consolidate``
    the messages a call prepared (``lamina.memory.messages``). Holds the writes port (one
    transaction), the reads port (the nearest stored facts) and the embeddings port."""

    #: Set by the runtime (``ms.memory.chat_model``): the chat model consolidation asks
    #: (None: infer=True is refused).
    chat_model: Callable[[], ChatModel] | None = None

    def __init__(self, shared: MemoryShared, ports: MemoryPorts) -> None:
        super().__init__(shared)
        self._writes = ports.writes
        self._reads = ports.reads
        self._embeddings = ports.embeddings

    @cached_property
    def counter(self) -> TokenCounter:
        """Counts prompt tokens (the runtime sets its own: ``ms.memory.counter``)."""
        return default_counter()

    def _model(self) -> ChatModel:
        if self.chat_model is None:
            raise LaminaError(
                ErrorCode.CONFIGURATION_ERROR,
                "infer=True needs a chat model: set llm.model (LAMINA_LLM__MODEL) and, for a "
                "local server, llm.base_url; or store the messages verbatim with infer=False",
            )
        return self.chat_model()

    async def consolidate(
        self, tenant: str, prepared: Prepared, actor: str | None
    ) -> list[AddedMessages]:
        """The facts of the prepared messages decided and stored with them, in one
        transaction (decided again on a CONFLICT); one result per conversation."""
        plans, new = prepared.plans, prepared.memories
        model = self._model()
        facts = await self._extract_all(tenant, model, plans, new)
        for attempt in range(CONFLICT_ATTEMPTS):
            steps, change, fact_flags = await self._decide_all(tenant, model, plans, new, facts)
            try:
                stored = await self._write(change, actor)
            except LaminaError as exc:
                if exc.code is not ErrorCode.CONFLICT:
                    raise
                if attempt == CONFLICT_ATTEMPTS - 1:
                    raise LaminaError(
                        ErrorCode.CONFLICT,
                        f"{exc.message} (tried {CONFLICT_ATTEMPTS} times; call again)",
                        retryable=True,
                        details=exc.details,
                    ) from None
                continue
            outcomes = _outcomes(len(plans), steps, stored, fact_flags)
            return results_of(plans, stored.messages, prepared.flagged, outcomes)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _write(self, change: Consolidation, actor: str | None) -> Consolidated:
        return await self._retry.run(
            "consolidate", lambda: self._writes.consolidate(change, actor=actor)
        )

    # -- extraction -------------------------------------------------------------------------

    async def _ask(
        self, model: ChatModel, system: str, text: str, what: str, read: Callable[[str], Any]
    ) -> Any:
        """One model call and its answer read. An answer that is not what was asked for is
        asked again by the shared policy; the call's own failures (connection, timeout,
        5xx) were retried by the chat model (``llm.max_retries``, the one retry layer of a
        call) and are raised as they come, not retried a second time over."""

        async def call() -> Any:
            try:
                answer = await model.generate(
                    request(
                        ("user", text),
                        system=system,
                        temperature=0.0,
                        json_output=True,
                        max_tokens=ANSWER_TOKENS,
                    )
                )
            except LaminaError as exc:
                raise _CallFailed(exc) from None
            return read(answer.content)

        try:
            return await self._retry.run(what, call)
        except _CallFailed as failed:
            raise failed.error from None

    async def _extract_all(
        self, tenant: str, model: ChatModel, plans: list[Plan], new: list[NewMemory]
    ) -> list[Extracted]:
        facts: list[Extracted] = []
        for p, (plan, mine) in enumerate(per_plan(plans, new)):
            facts += await self._extract(model, p, mine, plan.resolved.get("user_id"))
        vectors = await self._embed_texts(tenant, [f.text for f in facts])
        for fact, vector in zip(facts, vectors, strict=True):
            fact.vector = vector
        return facts

    async def _extract(
        self, model: ChatModel, p: int, messages: Sequence[NewMemory], user: str | None
    ) -> list[Extracted]:
        """The facts of one conversation's messages. The prompt names each speaker as the
        memory does (a message's ``name``), and a user's message without a name by the
        scope's user id: the model writes facts about "alice", not about "user"."""
        lines = []
        for i, m in enumerate(messages):
            said = m.metadata[CONVERSATION_KEY]
            speaker = str(said["speaker"])
            if user is not None and said.get("role") == "user" and speaker == "user":
                speaker = user
            lines.append(Line(i, speaker, str(said["timestamp"]), m.content))
        budget = self._settings.infer_max_input_tokens
        out: dict[str, Extracted] = {}
        for batch, indexes in batch_lines(lines, budget, self.counter):
            found: list[Fact] = await self._ask(
                model,
                EXTRACT_SYSTEM,
                render_messages(batch),
                "extract facts",
                functools.partial(parse_facts, messages=len(indexes)),
            )
            batch_ids = [messages[i].id for i in indexes]
            for fact in found:
                sources = sources_of(fact, batch_ids)
                times = [
                    m.lifetime.event_at for m in messages if m.id in sources and m.lifetime.event_at
                ]
                key = fact.text.casefold()
                if key not in out:
                    out[key] = Extracted(p, fact.text, sources, max(times, default=now()))
        return list(out.values())

    async def _embed_texts(self, tenant: str, texts: list[str]) -> list[Vector]:
        if not texts:
            return []
        vectors = await self._retry.run(
            "embed", lambda: self._embeddings.generate_embedding(tenant, texts)
        )
        return list(vectors)

    # -- decisions --------------------------------------------------------------------------

    async def _nearest(self, tenant: str, plan: Plan, fact: Extracted) -> list[ScoredMemory]:
        """The stored facts (not messages) of the plan's scope nearest to ``fact``, valid and
        not expired, best first."""
        req = LayerSearch(
            tenant,
            plan.scope,
            SearchMode.HYBRID,
            fact.text,
            fact.vector,
            tuple(analyze(fact.text)),
            0.0,
            self._settings.infer_candidates,
            MetadataFilter(),
            self._settings.hybrid_semantic_weight,
            QuerySignals.of(fact.text),
            TimeWindow(),
            messages=False,
        )
        hits = await self._retry.run("search", lambda: self._reads.search(req))
        return hits.hits

    async def _decide_all(
        self,
        tenant: str,
        model: ChatModel,
        plans: list[Plan],
        new: list[NewMemory],
        facts: list[Extracted],
    ) -> tuple[list[Step], Consolidation, dict[int, list[dict[str, Any]]]]:
        claims = Claims()
        steps: list[Step] = []
        for fact in facts:
            fact.candidates = await self._nearest(tenant, plans[fact.plan], fact)
        budget = self._settings.infer_max_input_tokens

        def cost(fact: Extracted) -> int:
            shown_texts = [fact.text, *(shown(c.entry.content) for c in fact.candidates)]
            return sum(self.counter.count(t) for t in shown_texts)

        for p in range(len(plans)):
            mine = [f for f in facts if f.plan == p]
            for batch in batches(mine, cost, budget, size=self._settings.infer_facts_per_call):
                steps += await self._decide(model, batch, claims)
        return await self._change(tenant, plans, new, steps)

    async def _decide(self, model: ChatModel, batch: list[Extracted], claims: Claims) -> list[Step]:
        nearest: dict[str, ScoredMemory] = {}
        for fact in batch:
            for hit in fact.candidates:
                nearest.setdefault(hit.entry.id, hit)
        refs = {str(i + 1): mid for i, mid in enumerate(nearest)}
        known = {**refs, **{mid: mid for mid in nearest}}
        prompt = render_decision(
            [f.text for f in batch],
            [(ref, nearest[mid].entry.content) for ref, mid in refs.items()],
        )
        decisions: list[Decision] = await self._ask(
            model,
            DECIDE_SYSTEM,
            prompt,
            "decide facts",
            lambda raw: parse_decisions(raw, len(batch), known, claims),
        )
        out = []
        for fact, decision in zip(batch, decisions, strict=True):
            step = Step(fact, decision)
            if decision.event is FactEvent.NOOP and decision.targets:
                step.noop = nearest[decision.targets[0]].entry
            if decision.event is FactEvent.UPDATE:
                step.previous = nearest[decision.targets[0]].entry.content
            out.append(step)
        return out

    async def _change(
        self, tenant: str, plans: list[Plan], new: list[NewMemory], steps: list[Step]
    ) -> tuple[list[Step], Consolidation, dict[int, list[dict[str, Any]]]]:
        """The one transaction the steps make, and the policy violations of written facts
        (by step)."""
        added: list[NewMemory] = []
        revised: list[Revision] = []
        invalidated: list[Invalidation] = []
        flags: dict[int, list[dict[str, Any]]] = {}
        rewrites = [
            s.decision.text or s.fact.text for s in steps if s.decision.event is FactEvent.UPDATE
        ]
        rewrite_vectors = iter(await self._embed_texts(tenant, rewrites))
        for n, step in enumerate(steps):
            fact, decision, plan = step.fact, step.decision, plans[step.fact.plan]
            event = decision.event
            if event is FactEvent.NOOP:
                continue
            seen = {c.entry.id: c.entry for c in fact.candidates}
            meta = {
                **plan.metadata,
                SOURCES_KEY: {"conversation": plan.conversation_id, "messages": fact.sources},
            }
            text = decision.text or fact.text if event is FactEvent.UPDATE else fact.text
            if self._write_guard is not None:
                found = await self._write_guard(tenant, plan.layer.value, plan.resolved, text)
                if found:
                    flags[n] = found
            if event is FactEvent.UPDATE:
                target = decision.targets[0]
                step.revised = len(revised)
                # The rewritten fact comes from the new evidence now: its time is the
                # evidence's, as inferred_from names it.
                revised.append(
                    Revision(
                        target,
                        seen[target].updated_at,
                        text,
                        next(rewrite_vectors),
                        meta,
                        event_at=fact.event_at,
                    )
                )
                continue
            for target in decision.targets:  # DELETE: contradicted, no longer valid
                old = seen[target]
                at = fact.event_at if fact.event_at > (old.event_at or old.created_at) else now()
                step.invalidated.append(len(invalidated))
                invalidated.append(Invalidation(target, at, old.updated_at))
            step.added = len(added)
            life = Lifetime(event_at=fact.event_at, expires_at=plan.lifetime.expires_at)
            added.append(
                NewMemory(
                    str(uuid.uuid4()),
                    tenant,
                    plan.scope,
                    fact.text,
                    meta,
                    fact.vector,
                    lifetime=life,
                    dedup=True,
                )
            )
        revised += await self._retry.run(
            "get", lambda: superseded(self._reads, tenant, steps, invalidated)
        )
        change = Consolidation(tenant, new, added, revised, invalidated)
        return steps, change, flags


def _outcomes(
    plans: int,
    steps: Sequence[Step],
    stored: Consolidated,
    flags: dict[int, list[dict[str, Any]]],
) -> list[list[FactOutcome]]:
    out: list[list[FactOutcome]] = [[] for _ in range(plans)]
    for n, step in enumerate(steps):
        event = step.decision.event
        memory: MemoryEntry | None = step.noop
        if step.added is not None:
            memory = stored.added[step.added]
            if memory.deduplicated and event is FactEvent.ADD:
                event = FactEvent.NOOP  # the scope already held exactly this
        elif step.revised is not None:
            memory = stored.revised[step.revised]
        if memory is not None and n in flags:
            memory = memory.model_copy(update={"violations": flags[n]})
        out[step.fact.plan].append(
            FactOutcome(
                fact=step.fact.text,
                event=event,
                memory=memory,
                previous_content=step.previous,
                invalidated=[stored.invalidated[i] for i in step.invalidated],
                sources=step.fact.sources,
            )
        )
    return out
