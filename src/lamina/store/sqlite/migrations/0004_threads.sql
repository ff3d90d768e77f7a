-- lamina embedded store, schema version 4: A2A threads (contextId) and tasks.
CREATE TABLE a2a_threads (
    tenant_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    expired_at REAL,
    context TEXT NOT NULL DEFAULT '{}',
    context_expires_at REAL,
    version INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, thread_id)
);
CREATE INDEX a2a_threads_updated ON a2a_threads (updated_at) WHERE expired_at IS NULL;
CREATE INDEX a2a_threads_context_expiry ON a2a_threads (context_expires_at)
    WHERE context_expires_at IS NOT NULL;
CREATE INDEX a2a_threads_expired ON a2a_threads (expired_at) WHERE expired_at IS NOT NULL;

CREATE TABLE a2a_tasks (
    tenant_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    context_id TEXT NOT NULL,
    state INTEGER NOT NULL,
    updated_ns INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (tenant_id, task_id)
);
CREATE INDEX a2a_tasks_recent ON a2a_tasks (tenant_id, updated_ns DESC, task_id DESC);
CREATE INDEX a2a_tasks_context ON a2a_tasks (tenant_id, context_id);
