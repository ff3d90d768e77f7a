"""lamina: layered long-term memory, knowledge and governance for AI agents.

The public names are resolved on first use (PEP 562), so ``import lamina`` is instant and
loads no heavy dependency (numpy, the ONNX model, git, pydantic-settings…) until a name that
needs it is touched. Type checkers and IDEs see them through the ``TYPE_CHECKING`` imports."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lamina.config import Settings, load_settings
    from lamina.context.models import (
        AgentLearning,
        ContextItem,
        ContextLayer,
        ExternalReference,
        RetrievalResult,
        SkillPattern,
        UserKnowledge,
    )
    from lamina.context.providers import (
        RuntimeContextAdapter,
        ToolDescriptor,
        ToolRegistryAdapter,
        session_scope,
    )
    from lamina.errors import ErrorCode, LaminaError
    from lamina.facade import Lamina
    from lamina.memory.layers import MemoryLayer
    from lamina.memory.models import (
        AddedMessages,
        DeleteResult,
        FactEvent,
        FactOutcome,
        HierarchyLink,
        HistoryEvent,
        HistoryOperation,
        MemoryEntry,
        MemoryPage,
        Owner,
        OwnerPage,
        SearchHit,
        SearchMode,
    )
    from lamina.memory.service import ConversationInput, MemoryInput
    from lamina.runtime import AsyncLamina

__version__ = "0.1.0"

# Each public name and the module that defines it.
_EXPORTS: dict[str, str] = {
    "AddedMessages": "lamina.memory.models",
    "AgentLearning": "lamina.context.models",
    "AsyncLamina": "lamina.runtime",
    "ContextItem": "lamina.context.models",
    "ContextLayer": "lamina.context.models",
    "ConversationInput": "lamina.memory.service",
    "DeleteResult": "lamina.memory.models",
    "ErrorCode": "lamina.errors",
    "ExternalReference": "lamina.context.models",
    "FactEvent": "lamina.memory.models",
    "FactOutcome": "lamina.memory.models",
    "HierarchyLink": "lamina.memory.models",
    "HistoryEvent": "lamina.memory.models",
    "HistoryOperation": "lamina.memory.models",
    "Lamina": "lamina.facade",
    "LaminaError": "lamina.errors",
    "MemoryEntry": "lamina.memory.models",
    "MemoryInput": "lamina.memory.service",
    "MemoryLayer": "lamina.memory.layers",
    "MemoryPage": "lamina.memory.models",
    "Owner": "lamina.memory.models",
    "OwnerPage": "lamina.memory.models",
    "RetrievalResult": "lamina.context.models",
    "RuntimeContextAdapter": "lamina.context.providers",
    "SearchHit": "lamina.memory.models",
    "SearchMode": "lamina.memory.models",
    "Settings": "lamina.config",
    "SkillPattern": "lamina.context.models",
    "ToolDescriptor": "lamina.context.providers",
    "ToolRegistryAdapter": "lamina.context.providers",
    "UserKnowledge": "lamina.context.models",
    "load_settings": "lamina.config",
    "session_scope": "lamina.context.providers",
}

# A literal list, so that type checkers and IDEs read it.
__all__ = [
    "AddedMessages",
    "AgentLearning",
    "AsyncLamina",
    "ContextItem",
    "ContextLayer",
    "ConversationInput",
    "DeleteResult",
    "ErrorCode",
    "ExternalReference",
    "FactEvent",
    "FactOutcome",
    "HierarchyLink",
    "HistoryEvent",
    "HistoryOperation",
    "Lamina",
    "LaminaError",
    "MemoryEntry",
    "MemoryInput",
    "MemoryLayer",
    "MemoryPage",
    "Owner",
    "OwnerPage",
    "RetrievalResult",
    "RuntimeContextAdapter",
    "SearchHit",
    "SearchMode",
    "Settings",
    "SkillPattern",
    "ToolDescriptor",
    "ToolRegistryAdapter",
    "UserKnowledge",
    "__version__",
    "load_settings",
    "session_scope",
]


def __getattr__(name: str) -> Any:
    """Import the module behind a public name the first time it is asked for, and keep it."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lamina' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
