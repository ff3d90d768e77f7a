-- Retention bounded by bytes (server.max_task_bytes, issue 35). Each task keeps its stored
-- size (`size`: the bytes of its packed JSON, or of its text for a row stored before
-- packing), and `a2a_tasks_age` holds it beside the status time: the cleanup sums the
-- tasks' bytes and walks the oldest from the index.
ALTER TABLE a2a_tasks ADD COLUMN size integer NOT NULL DEFAULT 0;
ALTER TABLE a2a_tasks NO FORCE ROW LEVEL SECURITY;
UPDATE a2a_tasks SET size = coalesce(length(packed), octet_length(data));
ALTER TABLE a2a_tasks FORCE ROW LEVEL SECURITY;
DROP INDEX a2a_tasks_age;
CREATE INDEX a2a_tasks_age ON a2a_tasks (updated_ns, size);

-- The size caps (server.max_tasks, server.max_task_bytes, server.max_threads), across
-- tenants: past p_max_tasks tasks, then past p_max_bytes bytes of them, the oldest tasks in a
-- final state (p_final) go; past p_max_threads threads, the expired threads first (oldest
-- expiry), then the least recently used, never one with a task waiting on its client
-- (p_waiting), each with its tasks. Returns how many tasks and threads went.
DROP FUNCTION lamina_task_trim(bigint, bigint, integer[], integer[]);
CREATE FUNCTION lamina_task_trim(p_max_tasks bigint, p_max_bytes bigint, p_max_threads bigint,
        p_final integer[], p_waiting integer[])
    RETURNS TABLE (tasks_trimmed bigint, threads_trimmed bigint)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public
    AS $$
DECLARE
    n bigint; t bigint := 0; h bigint := 0; x bigint; freed bigint := 0;
    r record; cut record; any_cut boolean := false;
BEGIN
    SELECT count(*) INTO n FROM a2a_tasks;
    IF n > p_max_tasks THEN
        WITH doomed AS (
            SELECT tenant_id, task_id, ref_key FROM a2a_tasks WHERE state = ANY(p_final)
            ORDER BY updated_ns LIMIT n - p_max_tasks
        ), links AS (
            DELETE FROM a2a_task_links l USING doomed d
            WHERE l.tenant_id = d.tenant_id AND l.task = d.ref_key
        ), tasks AS (
            DELETE FROM a2a_tasks k USING doomed d
            WHERE k.tenant_id = d.tenant_id AND k.task_id = d.task_id RETURNING 1
        )
        SELECT count(*) INTO t FROM tasks;
    END IF;
    SELECT coalesce(sum(size), 0) INTO n FROM a2a_tasks;
    IF n > p_max_bytes THEN
        -- The newest of the oldest finished tasks that free enough: it and those before go.
        FOR r IN SELECT updated_ns, tenant_id, task_id, size FROM a2a_tasks
                WHERE state = ANY(p_final) ORDER BY updated_ns, tenant_id, task_id LOOP
            cut := r;
            any_cut := true;
            freed := freed + r.size;
            EXIT WHEN freed >= n - p_max_bytes;
        END LOOP;
        IF any_cut THEN
            WITH doomed AS (
                SELECT tenant_id, task_id, ref_key FROM a2a_tasks WHERE state = ANY(p_final)
                AND (updated_ns, tenant_id, task_id) <= (cut.updated_ns, cut.tenant_id,
                    cut.task_id)
            ), links AS (
                DELETE FROM a2a_task_links l USING doomed d
                WHERE l.tenant_id = d.tenant_id AND l.task = d.ref_key
            ), tasks AS (
                DELETE FROM a2a_tasks k USING doomed d
                WHERE k.tenant_id = d.tenant_id AND k.task_id = d.task_id RETURNING 1
            )
            SELECT count(*) INTO x FROM tasks;
            t := t + x;
        END IF;
    END IF;
    SELECT count(*) INTO n FROM a2a_threads;
    IF n > p_max_threads THEN
        WITH doomed AS (
            SELECT tenant_id, thread_id FROM a2a_threads th
            WHERE NOT EXISTS (SELECT 1 FROM a2a_tasks k WHERE k.tenant_id = th.tenant_id
                AND k.context_id = th.thread_id AND k.state = ANY(p_waiting))
            ORDER BY expired_at IS NULL, coalesce(expired_at, updated_at)
            LIMIT n - p_max_threads
        ), gone AS (
            DELETE FROM a2a_threads th USING doomed d
            WHERE th.tenant_id = d.tenant_id AND th.thread_id = d.thread_id
            RETURNING th.tenant_id, th.thread_id
        ), tasks AS (
            DELETE FROM a2a_tasks k USING gone g
            WHERE k.tenant_id = g.tenant_id AND k.context_id = g.thread_id
            RETURNING k.tenant_id, k.ref_key
        ), links AS (
            DELETE FROM a2a_task_links l USING tasks k
            WHERE l.tenant_id = k.tenant_id AND l.task = k.ref_key
        )
        SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM tasks) INTO h, x;
        t := t + x;
    END IF;
    RETURN QUERY SELECT t, h;
END
$$;
REVOKE ALL ON FUNCTION lamina_task_trim(bigint, bigint, bigint, integer[], integer[])
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lamina_task_trim(bigint, bigint, bigint, integer[], integer[])
    TO lamina_app;
