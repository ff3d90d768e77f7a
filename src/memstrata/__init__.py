"""memstrata: layered long-term memory, knowledge and governance for AI agents."""

from memstrata.config import Settings, load_settings
from memstrata.context.models import (
    AgentLearning,
    ContextItem,
    ContextLayer,
    ExternalReference,
    RetrievalResult,
    SkillPattern,
    UserKnowledge,
)
from memstrata.context.providers import (
    RuntimeContextAdapter,
    ToolDescriptor,
    ToolRegistryAdapter,
    session_scope,
)
from memstrata.errors import ErrorCode, MemstrataError
from memstrata.memory.layers import MemoryLayer
from memstrata.memory.models import (
    DeleteResult,
    HierarchyLink,
    HistoryEvent,
    HistoryOperation,
    MemoryEntry,
    MemoryPage,
    SearchHit,
    SearchMode,
)
from memstrata.memory.service import MemoryInput
from memstrata.runtime import AsyncMemstrata, Memstrata

__version__ = "0.1.0"

__all__ = [
    "AgentLearning",
    "AsyncMemstrata",
    "ContextItem",
    "ContextLayer",
    "DeleteResult",
    "ErrorCode",
    "ExternalReference",
    "HierarchyLink",
    "HistoryEvent",
    "HistoryOperation",
    "MemoryEntry",
    "MemoryInput",
    "MemoryLayer",
    "MemoryPage",
    "Memstrata",
    "MemstrataError",
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
