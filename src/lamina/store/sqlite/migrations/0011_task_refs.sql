-- lamina embedded store, schema version 11: forgetting reaches the A2A tasks. Each task is
-- indexed by the memories (kind 'memory') and sessions (kind 'session') it refers to, so
-- that forgetting one rewrites the tasks holding its text (lamina.threads.forgetting); the
-- rows go with their task.
CREATE TABLE a2a_task_refs (
    tenant_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    ref TEXT NOT NULL,
    task_id TEXT NOT NULL,
    PRIMARY KEY (tenant_id, kind, ref, task_id),
    FOREIGN KEY (tenant_id, task_id) REFERENCES a2a_tasks (tenant_id, task_id)
        ON DELETE CASCADE
);
CREATE INDEX a2a_task_refs_task ON a2a_task_refs (tenant_id, task_id);
-- The tasks stored before: the same references (lamina.threads.forgetting.references).
INSERT OR IGNORE INTO a2a_task_refs (tenant_id, kind, ref, task_id)
SELECT t.tenant_id,
       CASE WHEN j.key IN ('session_key', 'session_id') THEN 'session' ELSE 'memory' END,
       j.value, t.task_id
FROM a2a_tasks t, json_tree(t.data) j
WHERE j.type = 'text' AND length(j.value) BETWEEN 1 AND 256 AND (
    (j.key IN ('id', 'memory_id') AND j.fullkey GLOB '$.artifacts[[]*].parts[[]*].data*')
    OR (j.key IN ('id', 'memory_id', 'session_key', 'session_id')
        AND j.fullkey GLOB '$.history[[]*].parts[[]*].data*')
    OR (j.path GLOB '*.memory_ids' AND j.fullkey GLOB '$.*[[]*].parts[[]*].data*')
    OR (j.key IN ('session_key', 'session_id') AND j.path GLOB '$.history[[]*].metadata')
);
