-- A session's base system prompt (the one the context-aware model was given once and keeps
-- for the session's later turns), tenant-isolated by row-level security like every table.
CREATE TABLE session_prompts (
    tenant_id text NOT NULL,
    session_key text NOT NULL,
    content text NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, session_key)
);

GRANT SELECT, INSERT, UPDATE, DELETE ON session_prompts TO lamina_app;
ALTER TABLE session_prompts ENABLE ROW LEVEL SECURITY;
ALTER TABLE session_prompts FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON session_prompts
    USING (tenant_id = current_setting('lamina.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lamina.tenant_id', true));
