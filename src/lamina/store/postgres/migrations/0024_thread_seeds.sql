-- A one-shot call's thread is kept in its task (`thread`, packed:
-- lamina.store.sql.thread_seeds) until a call continues it, instead of a row of a2a_threads
-- and its index entries (issue 35). `a2a_tasks_threads` finds them for the cleanup, the
-- count of active threads and the size cap, which count them as threads.
ALTER TABLE a2a_tasks ADD COLUMN thread bytea;
CREATE INDEX a2a_tasks_threads ON a2a_tasks (updated_ns) WHERE thread IS NOT NULL;
-- ListTasks' index in ascending order (read backwards for newest first): new tasks come at
-- its end, where a page split leaves full pages, not at its start (half-empty pages).
DROP INDEX a2a_tasks_recent;
CREATE INDEX a2a_tasks_recent ON a2a_tasks (tenant_id, updated_ns, task_id);

-- The cleanup also deletes the threads kept in their task (with it and its links) idle for
-- p_idle_ttl and then p_retention, counted as purged threads and tasks.
CREATE OR REPLACE FUNCTION lamina_thread_cleanup(p_now double precision,
        p_idle_ttl double precision, p_retention double precision)
    RETURNS TABLE (threads_expired bigint, states_removed bigint, threads_purged bigint,
        tasks_purged bigint)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public
    AS $$
DECLARE
    e bigint; s bigint; p bigint; t bigint; q bigint;
BEGIN
    UPDATE a2a_threads SET expired_at = p_now, context = '{}', identifiers = '{}',
        context_expires_at = NULL, version = version + 1
        WHERE expired_at IS NULL AND updated_at + p_idle_ttl <= p_now;
    GET DIAGNOSTICS e = ROW_COUNT;
    UPDATE a2a_threads SET context = '{}', context_expires_at = NULL, version = version + 1
        WHERE context_expires_at IS NOT NULL AND context_expires_at <= p_now;
    GET DIAGNOSTICS s = ROW_COUNT;
    WITH gone AS (
        DELETE FROM a2a_threads WHERE expired_at IS NOT NULL AND expired_at + p_retention <= p_now
        RETURNING tenant_id, thread_id
    ), tasks AS (
        DELETE FROM a2a_tasks k USING gone g
        WHERE k.tenant_id = g.tenant_id AND k.context_id = g.thread_id
        RETURNING k.tenant_id, k.ref_key
    ), links AS (
        DELETE FROM a2a_task_links l USING tasks k
        WHERE l.tenant_id = k.tenant_id AND l.task = k.ref_key
    )
    SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM tasks) INTO p, t;
    WITH seeds AS (
        DELETE FROM a2a_tasks WHERE thread IS NOT NULL
            AND updated_ns <= ((p_now - p_idle_ttl - p_retention) * 1e9)::bigint
        RETURNING tenant_id, ref_key
    ), links AS (
        DELETE FROM a2a_task_links l USING seeds k
        WHERE l.tenant_id = k.tenant_id AND l.task = k.ref_key
    )
    SELECT count(*) INTO q FROM seeds;
    RETURN QUERY SELECT e, s, p + q, t + q;
END
$$;

CREATE OR REPLACE FUNCTION lamina_active_threads(p_now double precision,
        p_idle_ttl double precision)
    RETURNS bigint
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public
    AS $$ SELECT (SELECT count(*) FROM a2a_threads
                  WHERE expired_at IS NULL AND updated_at + p_idle_ttl > p_now)
               + (SELECT count(*) FROM a2a_tasks WHERE thread IS NOT NULL
                  AND updated_ns > ((p_now - p_idle_ttl) * 1e9)::bigint) $$;

-- The size caps (lamina_task_trim, migration 23) count the threads kept in their task as
-- threads: the least recently used of them and of the rows go first (after the expired
-- rows), each with its tasks.
CREATE OR REPLACE FUNCTION lamina_task_trim(p_max_tasks bigint, p_max_bytes bigint, p_max_threads bigint,
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
    SELECT (SELECT count(*) FROM a2a_threads)
        + (SELECT count(*) FROM a2a_tasks WHERE thread IS NOT NULL) INTO n;
    IF n > p_max_threads THEN
        WITH doomed AS (
            SELECT c.tenant_id, c.thread_id FROM (
                SELECT tenant_id, thread_id, expired_at IS NULL AS live,
                    coalesce(expired_at, updated_at) AS at FROM a2a_threads th
                WHERE NOT EXISTS (SELECT 1 FROM a2a_tasks k WHERE k.tenant_id = th.tenant_id
                    AND k.context_id = th.thread_id AND k.state = ANY(p_waiting))
                UNION ALL
                SELECT tenant_id, context_id, true, updated_ns / 1e9 FROM a2a_tasks
                WHERE thread IS NOT NULL AND NOT (state = ANY(p_waiting))
            ) c
            ORDER BY c.live, c.at LIMIT n - p_max_threads
        ), gone AS (
            DELETE FROM a2a_threads th USING doomed d
            WHERE th.tenant_id = d.tenant_id AND th.thread_id = d.thread_id
        ), tasks AS (
            DELETE FROM a2a_tasks k USING doomed d
            WHERE k.tenant_id = d.tenant_id AND k.context_id = d.thread_id
            RETURNING k.tenant_id, k.ref_key
        ), links AS (
            DELETE FROM a2a_task_links l USING tasks k
            WHERE l.tenant_id = k.tenant_id AND l.task = k.ref_key
        )
        SELECT (SELECT count(*) FROM doomed), (SELECT count(*) FROM tasks) INTO h, x;
        t := t + x;
    END IF;
    RETURN QUERY SELECT t, h;
END
$$;
