"""``ms.knowledge``: the git-backed knowledge repository. Every change is one commit with its
author and message; reads come from git, searches from the index in the database.

The service is put together from one part per concept: the repository and its index
(``repository``), the write path (``writes``), item writes (``items``), status transitions
(``lifecycle``), reads of one item (``reads``) and searches (``search``); promotions are
``ms.knowledge.promotions`` (``promotion``), set by the runtime."""

from __future__ import annotations

from lamina.knowledge.items import ItemWrites
from lamina.knowledge.lifecycle import Lifecycle
from lamina.knowledge.promotion import Promotions
from lamina.knowledge.reads import ItemReads
from lamina.knowledge.search import ItemSearch

__all__ = ["KnowledgeService"]


class KnowledgeService(ItemWrites, Lifecycle, ItemReads, ItemSearch):
    """create, update, set_status, get, history, diff, list, search, sync, rebuild, check."""

    #: ``ms.knowledge.promotions``: set by the runtime.
    promotions: Promotions
