-- lamina embedded store, schema version 14: what an A2A task keeps on disk (issue 35).
-- A task's JSON is stored compressed in `packed` (lamina.threads.packing; `data` is then
-- ''); rows stored before keep their text in `data`. Each task has a key, unique in its
-- tenant (`ref_key`, given on insert by the trigger below: SQLite's rowid may change on
-- VACUUM), and its references (lamina.threads.forgetting) become `a2a_task_links` rows of
-- integers: the reference's 64-bit hash (lamina_ref_key, registered on every connection)
-- and the task's key, instead of two texts and three index entries a reference. The links
-- go with their task (the cleanup and deletes remove them). `a2a_tasks_age` orders finished
-- tasks across tenants for the size cap (server.max_tasks).
ALTER TABLE a2a_tasks ADD COLUMN packed BLOB;
ALTER TABLE a2a_tasks ADD COLUMN ref_key INTEGER;
UPDATE a2a_tasks SET ref_key = rowid;
CREATE INDEX a2a_tasks_key ON a2a_tasks (tenant_id, ref_key);
CREATE INDEX a2a_tasks_age ON a2a_tasks (updated_ns);
CREATE TRIGGER a2a_tasks_new_key AFTER INSERT ON a2a_tasks WHEN NEW.ref_key IS NULL
BEGIN
    UPDATE a2a_tasks SET ref_key = (
        SELECT coalesce(max(ref_key), 0) + 1 FROM a2a_tasks WHERE tenant_id = NEW.tenant_id
    ) WHERE rowid = NEW.rowid;
END;

CREATE TABLE a2a_task_links (
    tenant_id TEXT NOT NULL,
    ref INTEGER NOT NULL,
    task INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, ref, task)
) WITHOUT ROWID;
CREATE INDEX a2a_task_links_task ON a2a_task_links (tenant_id, task);
INSERT OR IGNORE INTO a2a_task_links (tenant_id, ref, task)
SELECT r.tenant_id, lamina_ref_key(r.kind, r.ref), t.ref_key
FROM a2a_task_refs r JOIN a2a_tasks t ON t.tenant_id = r.tenant_id AND t.task_id = r.task_id;
DROP TABLE a2a_task_refs;
