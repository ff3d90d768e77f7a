"""Context layers: keywords, retrieval, prompt assembly and the context-aware model."""
