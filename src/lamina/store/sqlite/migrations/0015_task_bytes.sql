-- lamina embedded store, schema version 15: retention bounded by bytes (server.max_task_bytes,
-- issue 35). Each task keeps its stored size (`size`: the bytes of its packed JSON, or of
-- its text for a row stored before packing), and `a2a_tasks_age` holds it beside the status
-- time, so that the cleanup sums the tasks' bytes and finds the oldest from the index alone.
ALTER TABLE a2a_tasks ADD COLUMN size INTEGER NOT NULL DEFAULT 0;
UPDATE a2a_tasks SET size = coalesce(length(packed), length(CAST(data AS BLOB)));
DROP INDEX a2a_tasks_age;
CREATE INDEX a2a_tasks_age ON a2a_tasks (updated_ns, size);
