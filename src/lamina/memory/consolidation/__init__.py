"""Consolidation with a chat model: facts extracted from messages, compared with what a
scope holds, and added, rewritten, invalidated or left (docs/memory.md, "Consolidation")."""

from lamina.memory.consolidation.service import Consolidating

__all__ = ["Consolidating"]
