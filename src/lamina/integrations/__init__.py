"""Adapters for agent frameworks, one module per framework and the only place importing it:
``langgraph`` (a LangGraph BaseStore), ``openai_agents`` (an OpenAI Agents SDK session and
tools), ``langchain`` (chat-message history and a retriever), ``pydantic_ai`` (a toolset).
Each needs its extra: ``pip install 'lamina[langgraph]'`` and so on."""
