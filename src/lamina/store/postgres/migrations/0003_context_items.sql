-- The searchable context layers (user knowledge, agent learnings, skill patterns, external
-- references) in one table, one row per version. {dimensions} is the embedder's dimension.
CREATE TABLE context_items (
    tenant_id text NOT NULL,
    kind text NOT NULL,
    id text NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    key text NOT NULL,
    version integer NOT NULL,
    is_latest boolean NOT NULL,
    category text,
    content text NOT NULL,
    data jsonb NOT NULL DEFAULT '{}',
    tags jsonb NOT NULL DEFAULT '[]',
    embedding vector({dimensions}),
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, kind, id),
    UNIQUE (tenant_id, kind, key, version)
);
CREATE INDEX context_items_latest ON context_items (tenant_id, kind, seq) WHERE is_latest;
CREATE INDEX context_items_embedding ON context_items USING hnsw (embedding vector_cosine_ops)
    WHERE is_latest;
CREATE INDEX context_items_tsv ON context_items USING gin (tsv) WHERE is_latest;

GRANT SELECT, INSERT, UPDATE, DELETE ON context_items TO lamina_app;
ALTER TABLE context_items ENABLE ROW LEVEL SECURITY;
ALTER TABLE context_items FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON context_items
    USING (tenant_id = current_setting('lamina.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lamina.tenant_id', true));
