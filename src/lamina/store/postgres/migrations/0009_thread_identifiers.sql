-- A thread's identifiers (user_id, project_id, ...) live as long as the thread, apart from
-- its conversation context, which expires sooner (server.state_ttl). Threads stored before
-- keep the identifiers their context holds (every context was written as a JSON object).
ALTER TABLE a2a_threads ADD COLUMN identifiers text NOT NULL DEFAULT '{}';
ALTER TABLE a2a_threads NO FORCE ROW LEVEL SECURITY;
UPDATE a2a_threads SET identifiers = (context::jsonb -> 'identifiers')::text
    WHERE context LIKE '%"identifiers"%'
        AND jsonb_typeof(context::jsonb -> 'identifiers') = 'object';
ALTER TABLE a2a_threads FORCE ROW LEVEL SECURITY;

-- Expiring a thread clears its identifiers too; expiring a context keeps them.
CREATE OR REPLACE FUNCTION lamina_thread_cleanup(p_now double precision,
        p_idle_ttl double precision, p_retention double precision)
    RETURNS TABLE (threads_expired bigint, states_removed bigint, threads_purged bigint,
        tasks_purged bigint)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public
    AS $$
DECLARE
    e bigint; s bigint; p bigint; t bigint;
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
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM tasks) INTO p, t;
    RETURN QUERY SELECT e, s, p, t;
END
$$;
