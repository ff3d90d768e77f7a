-- Memories by user_id in each layer: the agent and session memories of a user carry its id
-- after their own in the scope key, so without this index list_all, count_all, delete_all
-- and owners by user_id read every agent and session memory of the tenant.
CREATE INDEX IF NOT EXISTS memories_user ON memories (tenant_id, layer, (identifiers ->> 'user_id'));
-- Under row-level security PostgreSQL uses an index for a condition only when its functions
-- are LEAKPROOF (as 0005 says of ts_match_vq); jsonb ->> text (jsonb_object_field_text)
-- raises no data-dependent error (NULL for a missing key or a non-object), so it is marked
-- so here. Only a superuser may do this; without one these reads stay correct, only slower
-- (a user's list at 20k memories in a tenant: 58 ms against 0.2 ms), and
-- docs/postgresql.md tells the administrator the statement to run.
DO $$
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        ALTER FUNCTION pg_catalog.jsonb_object_field_text(jsonb, text) LEAKPROOF;
    ELSE
        RAISE NOTICE 'lamina: run "ALTER FUNCTION pg_catalog.jsonb_object_field_text(jsonb, text) LEAKPROOF" as a superuser so that reads of a user''s memories across layers can use their index';
    END IF;
END
$$;
