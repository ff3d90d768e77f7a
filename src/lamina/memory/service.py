"""``ms.memory``: scoped memories. The service holds one part per concept, each a small class
holding the shared state (``base.MemoryShared``), the memory ports it uses and the other
parts it calls; each public call is one part's method (``add`` is ``writes.add``):

- ``hierarchy``: the links project → team → org → company, and the scopes a call reaches;
- ``backfill``: embeddings added after the memory (the embedding buffer);
- ``writes``: add, bulk_add, update, delete, bulk_delete;
- ``messages``: conversations in (add_messages, add_messages_bulk, ``add(infer=True)``);
- ``consolidation``: ``infer=True``, facts decided by the chat model;
- ``reads``: search and its ranking, get, list, history;
- ``ownership``: memories by who holds them (count_by_layer, owners, list_all);
- ``lifecycle``: invalidate, purge_expired and the expiry job;
- ``forgetting``: count_all, delete_all, forget;
- ``transfer``: export and import;
- ``reembedding``: reembed and embedding_status."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from lamina.buffer import BackgroundBuffer
from lamina.config import MemorySettings
from lamina.delegation import Delegate, Forward
from lamina.embeddings.query_cache import QueryVectors
from lamina.llm.base import ChatModel
from lamina.memory.backfill import Backfill
from lamina.memory.base import MemoryShared, WriteGuard
from lamina.memory.consolidation import Consolidator
from lamina.memory.forgetting import MemoryForgetting
from lamina.memory.hierarchy import Hierarchy
from lamina.memory.lifecycle import Lifecycle
from lamina.memory.messages import ConversationInput, MessageWrites
from lamina.memory.owners import MemoryOwners
from lamina.memory.ports import ItemText, MemoryPorts
from lamina.memory.reads import MemoryReads
from lamina.memory.reembed import Reembed
from lamina.memory.transfer import MemoryTransfer
from lamina.memory.writes import MemoryInput, MemoryWrites
from lamina.metrics import MemoryMetrics
from lamina.retry import RetryPolicy
from lamina.tokens import TokenCounter

__all__ = ["ConversationInput", "MemoryInput", "MemoryService", "WriteGuard"]


class MemoryService:
    """``ms.memory``: add, add_messages, search, get, update, delete, delete_all, list,
    history, export, import_ and hierarchy; invalidate and purge_expired; who holds memories
    (``count_by_layer``, ``owners``, ``list_all``); reembed after a change of embedding
    model (``reembed``)."""

    def __init__(
        self,
        ports: MemoryPorts,
        settings: MemorySettings,
        *,
        default_tenant: str,
        metrics: MemoryMetrics,
        retry: RetryPolicy,
        ready: Callable[[], Awaitable[None]],
        queries: QueryVectors | None = None,
    ) -> None:
        shared = MemoryShared(
            settings, default_tenant=default_tenant, metrics=metrics, retry=retry, ready=ready
        )
        #: What every part shares (settings, metrics, retries, the write guard).
        self.shared = shared
        self.hierarchy = Hierarchy(shared, ports)
        self.backfill = Backfill(shared, ports)
        self.consolidation = Consolidator(shared, ports)
        self.messages = MessageWrites(
            shared, ports, hierarchy=self.hierarchy, consolidate=self.consolidation.consolidate
        )
        self.writes = MemoryWrites(
            shared,
            ports,
            hierarchy=self.hierarchy,
            backfill=self.backfill,
            add_inferred=self.messages.add_inferred,
        )
        self.reads = MemoryReads(
            shared,
            ports,
            hierarchy=self.hierarchy,
            queries=queries
            or QueryVectors(
                lambda tenant, texts: ports.embeddings.generate_embedding(
                    tenant, texts, cache=False
                ),
                retry,
            ),
        )
        self.ownership = MemoryOwners(shared, ports)
        self.lifecycle = Lifecycle(shared, ports)
        self.forgetting = MemoryForgetting(shared, ports)
        self.transfer = MemoryTransfer(shared, ports)
        self.reembedding = Reembed(shared, ports)

    # -- writes -----------------------------------------------------------------------------
    add = Delegate("writes", MemoryWrites.add)
    bulk_add = Delegate("writes", MemoryWrites.bulk_add)
    update = Delegate("writes", MemoryWrites.update)
    delete = Delegate("writes", MemoryWrites.delete)
    bulk_delete = Delegate("writes", MemoryWrites.bulk_delete)
    add_messages = Delegate("messages", MessageWrites.add_messages)
    add_messages_bulk = Delegate("messages", MessageWrites.add_messages_bulk)

    # -- reads ------------------------------------------------------------------------------
    search = Delegate("reads", MemoryReads.search)
    get = Delegate("reads", MemoryReads.get)
    list = Delegate("reads", MemoryReads.list)
    history = Delegate("reads", MemoryReads.history)
    count_by_layer = Delegate("ownership", MemoryOwners.count_by_layer)
    owners = Delegate("ownership", MemoryOwners.owners)
    list_all = Delegate("ownership", MemoryOwners.list_all)

    # -- hierarchy --------------------------------------------------------------------------
    register_hierarchy = Delegate("hierarchy", Hierarchy.register_hierarchy)
    set_hierarchy_defaults = Delegate("hierarchy", Hierarchy.set_hierarchy_defaults)
    resolve_identifiers = Delegate("hierarchy", Hierarchy.resolve_identifiers)

    # -- time, forgetting, transfer ---------------------------------------------------------
    invalidate = Delegate("lifecycle", Lifecycle.invalidate)
    purge_expired = Delegate("lifecycle", Lifecycle.purge_expired)
    start_expiry = Delegate("lifecycle", Lifecycle.start_expiry)
    stop_expiry = Delegate("lifecycle", Lifecycle.stop_expiry)
    count_all = Delegate("forgetting", MemoryForgetting.count_all)
    delete_all = Delegate("forgetting", MemoryForgetting.delete_all)
    forget = Delegate("forgetting", MemoryForgetting.forget)
    export = Delegate("transfer", MemoryTransfer.export)
    export_pages = Delegate("transfer", MemoryTransfer.export_pages)
    import_ = Delegate("transfer", MemoryTransfer.import_)

    # -- embeddings -------------------------------------------------------------------------
    embed_pending = Delegate("backfill", Backfill.embed_pending)
    flush_embeddings = Delegate("backfill", Backfill.flush_embeddings)
    embedding_status = Delegate("reembedding", Reembed.embedding_status)
    reembed = Delegate("reembedding", Reembed.reembed)

    embedding_buffer = Forward[BackgroundBuffer[str]](
        "backfill", "Embeds memories added with background_embedding=True, per tenant."
    )

    # -- what the runtime sets --------------------------------------------------------------
    write_guard = Forward[WriteGuard | None](
        "shared",
        """Checks content entering a shared layer (governance): raises POLICY_VIOLATION on a
        block, returns the violations that do not block. Every part that writes asks it.""",
        settable=True,
    )
    chat_model = Forward[Callable[[], ChatModel] | None](
        "consolidation",
        "The chat model consolidation asks (None: infer=True is refused).",
        settable=True,
    )
    counter = Forward[TokenCounter](
        "consolidation", "Counts consolidation's prompt tokens.", settable=True
    )
    item_text = Forward[ItemText](
        "reembedding", "The text each context item's vector stands for (reembed).", settable=True
    )
