"""The servers: A2A (HTTP, JSON-RPC, REST, SSE) and MCP over one runtime."""
