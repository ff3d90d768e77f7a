-- lamina PostgreSQL store, schema version 1. {dimensions} is the embedder's dimension.
-- Every table leads with tenant_id (primary and unique keys too): ready to shard by tenant.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE store_meta (
    key text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE memories (
    tenant_id text NOT NULL,
    id text NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    layer text NOT NULL,
    scope_key text NOT NULL,
    identifiers jsonb NOT NULL,
    content text NOT NULL,
    metadata jsonb NOT NULL DEFAULT '{}',
    embedding vector({dimensions}),
    embedding_model text,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX memories_scope ON memories (tenant_id, layer, scope_key, seq);
CREATE INDEX memories_embedding ON memories USING hnsw (embedding vector_cosine_ops);
CREATE INDEX memories_tsv ON memories USING gin (tsv);

CREATE TABLE memory_history (
    tenant_id text NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    memory_id text NOT NULL,
    operation text NOT NULL,
    layer text NOT NULL,
    old_content text,
    new_content text,
    old_metadata jsonb,
    new_metadata jsonb,
    actor text,
    at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, seq)
);
CREATE INDEX memory_history_memory ON memory_history (tenant_id, memory_id, seq);

CREATE TABLE embedding_cache (
    tenant_id text NOT NULL,
    model text NOT NULL,
    content_hash text NOT NULL,
    vector bytea NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, model, content_hash)
);

CREATE TABLE hierarchy (
    tenant_id text NOT NULL,
    level text NOT NULL,
    child_id text NOT NULL,
    parent_id text NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, level, child_id)
);

-- Tenant isolation inside the database: every statement runs as lamina_app, which sees
-- only the rows of the tenant set for the transaction (lamina.tenant_id).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lamina_app') THEN
        CREATE ROLE lamina_app NOLOGIN;
    END IF;
END
$$;
GRANT lamina_app TO CURRENT_USER;
GRANT USAGE ON SCHEMA public TO lamina_app;
GRANT SELECT ON store_meta TO lamina_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON memories, memory_history, embedding_cache, hierarchy
    TO lamina_app;

ALTER TABLE memories ENABLE ROW LEVEL SECURITY;
ALTER TABLE memories FORCE ROW LEVEL SECURITY;
ALTER TABLE memory_history ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_history FORCE ROW LEVEL SECURITY;
ALTER TABLE embedding_cache ENABLE ROW LEVEL SECURITY;
ALTER TABLE embedding_cache FORCE ROW LEVEL SECURITY;
ALTER TABLE hierarchy ENABLE ROW LEVEL SECURITY;
ALTER TABLE hierarchy FORCE ROW LEVEL SECURITY;

CREATE POLICY tenant_isolation ON memories
    USING (tenant_id = current_setting('lamina.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lamina.tenant_id', true));
CREATE POLICY tenant_isolation ON memory_history
    USING (tenant_id = current_setting('lamina.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lamina.tenant_id', true));
CREATE POLICY tenant_isolation ON embedding_cache
    USING (tenant_id = current_setting('lamina.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lamina.tenant_id', true));
CREATE POLICY tenant_isolation ON hierarchy
    USING (tenant_id = current_setting('lamina.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lamina.tenant_id', true));

-- Aggregate counts for the memory_storage_size metric, across tenants, without rows.
CREATE FUNCTION lamina_layer_counts() RETURNS TABLE (layer text, n bigint)
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public
    AS $$ SELECT layer, count(*) FROM memories GROUP BY layer $$;
REVOKE ALL ON FUNCTION lamina_layer_counts() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lamina_layer_counts() TO lamina_app;
