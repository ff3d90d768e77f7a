-- lamina embedded store, schema version 16: a one-shot call's thread is kept in its task
-- (`thread`, packed: lamina.store.sql.thread_seeds) until a call continues it, instead of a
-- row of a2a_threads and three index entries (issue 35). `a2a_tasks_threads` finds them
-- for the cleanup, the count of active threads and the size cap.
ALTER TABLE a2a_tasks ADD COLUMN thread BLOB;
CREATE INDEX a2a_tasks_threads ON a2a_tasks (updated_ns) WHERE thread IS NOT NULL;
-- ListTasks' index in ascending order (read backwards for newest first): new tasks come at
-- its end, where a page split leaves full pages, not at its start (half-empty pages).
DROP INDEX a2a_tasks_recent;
CREATE INDEX a2a_tasks_recent ON a2a_tasks (tenant_id, updated_ns, task_id);
