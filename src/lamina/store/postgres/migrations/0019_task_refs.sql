-- Forgetting reaches the A2A tasks: each task is indexed by the memories (kind 'memory') and
-- sessions (kind 'session') it refers to, so that forgetting one rewrites the tasks holding
-- its text (lamina.threads.forgetting); the rows go with their task.
CREATE TABLE a2a_task_refs (
    tenant_id text NOT NULL,
    kind text NOT NULL,
    ref text NOT NULL,
    task_id text NOT NULL,
    PRIMARY KEY (tenant_id, kind, ref, task_id),
    FOREIGN KEY (tenant_id, task_id) REFERENCES a2a_tasks (tenant_id, task_id)
        ON DELETE CASCADE
);
CREATE INDEX a2a_task_refs_task ON a2a_task_refs (tenant_id, task_id);
GRANT SELECT, INSERT, UPDATE, DELETE ON a2a_task_refs TO lamina_app;
ALTER TABLE a2a_task_refs ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON a2a_task_refs
    USING (tenant_id = current_setting('lamina.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lamina.tenant_id', true));

-- The tasks stored before: the same references (lamina.threads.forgetting.references), read
-- across tenants by the owner (row-level security is forced on the tables after).
ALTER TABLE a2a_tasks NO FORCE ROW LEVEL SECURITY;
INSERT INTO a2a_task_refs (tenant_id, kind, ref, task_id)
SELECT t.tenant_id, f.kind, f.ref, t.task_id
FROM a2a_tasks t, LATERAL (
    SELECT 'memory' AS kind, v #>> '{}' AS ref FROM jsonb_path_query(t.data::jsonb,
        'lax $.artifacts[*].parts[*].data.**.id ? (@.type() == "string")') v
    UNION SELECT 'memory', v #>> '{}' FROM jsonb_path_query(t.data::jsonb,
        'lax $.artifacts[*].parts[*].data.**.memory_id ? (@.type() == "string")') v
    UNION SELECT 'memory', v #>> '{}' FROM jsonb_path_query(t.data::jsonb,
        'lax $.*[*].parts[*].data.**.memory_ids[*] ? (@.type() == "string")') v
    UNION SELECT 'memory', v #>> '{}' FROM jsonb_path_query(t.data::jsonb,
        'lax $.history[*].parts[*].data.**.memory_id ? (@.type() == "string")') v
    UNION SELECT 'session', v #>> '{}' FROM jsonb_path_query(t.data::jsonb,
        'lax $.history[*].parts[*].data.**.session_key ? (@.type() == "string")') v
    UNION SELECT 'session', v #>> '{}' FROM jsonb_path_query(t.data::jsonb,
        'lax $.history[*].parts[*].data.**.session_id ? (@.type() == "string")') v
    UNION SELECT 'session', v #>> '{}' FROM jsonb_path_query(t.data::jsonb,
        'lax $.history[*].metadata.session_id ? (@.type() == "string")') v
) f
WHERE length(f.ref) BETWEEN 1 AND 256
ON CONFLICT DO NOTHING;
ALTER TABLE a2a_tasks FORCE ROW LEVEL SECURITY;
ALTER TABLE a2a_task_refs FORCE ROW LEVEL SECURITY;
