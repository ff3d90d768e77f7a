-- lamina embedded store, schema version 10: a session's base system prompt (the one the
-- context-aware model was given once and keeps for the session's later turns).
CREATE TABLE session_prompts (
    tenant_id TEXT NOT NULL,
    session_key TEXT NOT NULL,
    content TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, session_key)
);
