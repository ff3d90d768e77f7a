"""``ms.knowledge``: the git-backed knowledge repository. Every change is one commit with its
author and message; reads come from git, searches from the index in the database.

The service holds one part per concept, and each public call is one part's method
(``ms.knowledge.create`` is ``ms.knowledge.items.create``): the repository and its
index (``Repository``: git, the index, the tenant's lock, sync), the write path (``Writer``:
one commit per change, governed), item writes (``ItemWrites``), status transitions
(``Lifecycle``), reads of one item (``ItemReads``), searches (``ItemSearch``) and promotions
(``ms.knowledge.promotions``: ``Promotions``)."""

from __future__ import annotations

from lamina.delegation import Delegate, Forward
from lamina.knowledge.gitstore import GitStore
from lamina.knowledge.index import KnowledgeIndex
from lamina.knowledge.items import ItemWrites
from lamina.knowledge.lifecycle import Lifecycle
from lamina.knowledge.promotion import Promotions
from lamina.knowledge.reads import ItemReads
from lamina.knowledge.repository import Repository
from lamina.knowledge.search import ItemSearch
from lamina.knowledge.writes import SecretGuard, WriteGuard, Writer

__all__ = ["KnowledgeService"]


class KnowledgeService:
    """create, update, set_status, get, history, diff, list, search, sync, rebuild, check."""

    def __init__(self, repository: Repository) -> None:
        """``repository``: git, the index and the limits of the calls, which every part is
        given (the runtime builds it)."""
        self.repository = repository
        self.writer = Writer(self.repository)
        self.items = ItemWrites(self.repository, self.writer)
        self.lifecycle = Lifecycle(self.repository, self.writer)
        self.reads = ItemReads(self.repository)
        self.searches = ItemSearch(self.repository)
        #: ``ms.knowledge.promotions``: request, decide, get and list promotions.
        self.promotions = Promotions(self.repository, self.writer)

    # -- what the repository holds, and the guards the runtime sets ------------------------

    git = Forward[GitStore]("repository", "The tenants' git repositories (the source of truth).")
    index = Forward[KnowledgeIndex]("repository", "The search index that follows each head.")
    guard = Forward[WriteGuard | None](
        "writer", "Set by the runtime: governance of writes (secrets, policies).", settable=True
    )
    secret_guard = Forward[SecretGuard | None](
        "writer",
        """Set by the runtime: the secret scan of what is not an item's content (commit
        messages).""",
        settable=True,
    )

    # -- item writes and transitions (ItemWrites, Lifecycle, Writer) -------------------------
    create = Delegate("items", ItemWrites.create)
    update = Delegate("items", ItemWrites.update)
    set_status = Delegate("lifecycle", Lifecycle.set_status)
    commit_change = Delegate("writer", Writer.commit_change)
    check_governance = Delegate("writer", Writer.check_governance)

    # -- reads of one item (ItemReads) ------------------------------------------------------
    get = Delegate("reads", ItemReads.get)
    history = Delegate("reads", ItemReads.history)
    diff = Delegate("reads", ItemReads.diff)

    # -- searches (ItemSearch) --------------------------------------------------------------
    list = Delegate("searches", ItemSearch.list)
    search = Delegate("searches", ItemSearch.search)
    items_at = Delegate("searches", ItemSearch.items_at)

    # -- the repository and its index (Repository) ------------------------------------------
    tenant = Delegate("repository", Repository.tenant)
    head = Delegate("repository", Repository.head)
    item_at = Delegate("repository", Repository.item_at)
    sync = Delegate("repository", Repository.sync)
    rebuild = Delegate("repository", Repository.rebuild)
    policy_version = Delegate("repository", Repository.policy_version)
    check = Delegate("repository", Repository.check)
