"""lamina: layered long-term memory, knowledge and governance for AI agents."""

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
