-- A2A threads (contextId) and tasks, tenant-isolated by row-level security like every table.
CREATE TABLE a2a_threads (
    tenant_id text NOT NULL,
    thread_id text NOT NULL,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL,
    expired_at double precision,
    context text NOT NULL DEFAULT '{}',
    context_expires_at double precision,
    version integer NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, thread_id)
);
CREATE INDEX a2a_threads_updated ON a2a_threads (updated_at) WHERE expired_at IS NULL;
CREATE INDEX a2a_threads_context_expiry ON a2a_threads (context_expires_at)
    WHERE context_expires_at IS NOT NULL;
CREATE INDEX a2a_threads_expired ON a2a_threads (expired_at) WHERE expired_at IS NOT NULL;

CREATE TABLE a2a_tasks (
    tenant_id text NOT NULL,
    task_id text NOT NULL,
    context_id text NOT NULL,
    state integer NOT NULL,
    updated_ns bigint NOT NULL,
    data text NOT NULL,
    PRIMARY KEY (tenant_id, task_id)
);
CREATE INDEX a2a_tasks_recent ON a2a_tasks (tenant_id, updated_ns DESC, task_id DESC);
CREATE INDEX a2a_tasks_context ON a2a_tasks (tenant_id, context_id);

GRANT SELECT, INSERT, UPDATE, DELETE ON a2a_threads, a2a_tasks TO lamina_app;
ALTER TABLE a2a_threads ENABLE ROW LEVEL SECURITY;
ALTER TABLE a2a_threads FORCE ROW LEVEL SECURITY;
ALTER TABLE a2a_tasks ENABLE ROW LEVEL SECURITY;
ALTER TABLE a2a_tasks FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON a2a_threads
    USING (tenant_id = current_setting('lamina.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lamina.tenant_id', true));
CREATE POLICY tenant_isolation ON a2a_tasks
    USING (tenant_id = current_setting('lamina.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lamina.tenant_id', true));

-- The cleanup job and the startup recovery work across tenants; only these two functions may.
CREATE FUNCTION lamina_thread_cleanup(p_now double precision, p_idle_ttl double precision,
        p_retention double precision)
    RETURNS TABLE (threads_expired bigint, states_removed bigint, threads_purged bigint,
        tasks_purged bigint)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public
    AS $$
DECLARE
    e bigint; s bigint; p bigint; t bigint;
BEGIN
    UPDATE a2a_threads SET expired_at = p_now, context = '{}', context_expires_at = NULL,
        version = version + 1
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
REVOKE ALL ON FUNCTION lamina_thread_cleanup(double precision, double precision,
    double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lamina_thread_cleanup(double precision, double precision,
    double precision) TO lamina_app;

CREATE FUNCTION lamina_active_threads(p_now double precision, p_idle_ttl double precision)
    RETURNS bigint
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public
    AS $$ SELECT count(*) FROM a2a_threads
          WHERE expired_at IS NULL AND updated_at + p_idle_ttl > p_now $$;
REVOKE ALL ON FUNCTION lamina_active_threads(double precision, double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lamina_active_threads(double precision, double precision)
    TO lamina_app;
