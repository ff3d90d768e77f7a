"""Consolidation with a chat model: facts extracted from messages, compared with what a
scope holds, and added, rewritten, invalidated or left (docs/memory.md, "Consolidation")."""

from lamina.memory.consolidation.service import Consolidator

__all__ = ["Consolidator"]
