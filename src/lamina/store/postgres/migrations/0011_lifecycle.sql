-- Time and write-time dedup (docs/memory.md). event_at: when the event a memory records
-- happened (a message's timestamp, else the creation time); valid_from / valid_until: the
-- interval the fact holds (NULL: unbounded; invalidating a fact sets valid_until);
-- expires_at: when a memory with a time to live stops being returned (the expiry job then
-- removes it); content_key: the hash of the normalised content of a memory written with
-- add / bulk_add (NULL for conversation messages, never deduplicated). Rows stored before
-- this version get their content_key from lamina when it applies this migration
-- (lamina.store.postgres.db).
ALTER TABLE memories ADD COLUMN event_at timestamptz;
ALTER TABLE memories ADD COLUMN valid_from timestamptz;
ALTER TABLE memories ADD COLUMN valid_until timestamptz;
ALTER TABLE memories ADD COLUMN expires_at timestamptz;
ALTER TABLE memories ADD COLUMN content_key text;
-- The backfill changes no indexed words: the postings trigger (migration 0008), whose
-- transition-table join is quadratic in the rows one statement updates, stays out of it.
ALTER TABLE memories DISABLE TRIGGER memories_terms_update;
UPDATE memories SET event_at = created_at;
UPDATE memories SET event_at = (metadata #>> '{conversation,timestamp}')::timestamptz
    WHERE jsonb_typeof(metadata #> '{conversation,timestamp}') = 'string'
        AND metadata #>> '{conversation,timestamp}'
            ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00$';
ALTER TABLE memories ENABLE TRIGGER memories_terms_update;
ALTER TABLE memories ALTER COLUMN event_at SET NOT NULL;
CREATE INDEX memories_event ON memories (tenant_id, layer, scope_key, event_at);
CREATE INDEX memories_expiry ON memories (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX memories_content_key ON memories (tenant_id, layer, scope_key, content_key)
    WHERE content_key IS NOT NULL;

-- The tenants holding memories whose time to live is over (the expiry job, across tenants,
-- without reading their rows).
CREATE FUNCTION lamina_expired_tenants(p_now timestamptz, p_limit integer)
    RETURNS TABLE (tenant_id text)
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public
    AS $$ SELECT DISTINCT m.tenant_id FROM (SELECT tenant_id FROM memories
        WHERE expires_at <= p_now ORDER BY expires_at LIMIT p_limit) m $$;
REVOKE ALL ON FUNCTION lamina_expired_tenants(timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lamina_expired_tenants(timestamptz, integer) TO lamina_app;
