-- Session messages and observational memory (observations, reflections, observer leases).
CREATE TABLE session_messages (
    tenant_id text NOT NULL,
    session_key text NOT NULL,
    idx integer NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    role text NOT NULL,
    content text NOT NULL,
    tool_calls jsonb NOT NULL DEFAULT '[]',
    token_count integer NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, session_key, idx)
);

CREATE TABLE observations (
    tenant_id text NOT NULL,
    id text NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    session_key text NOT NULL,
    content text NOT NULL,
    token_count integer NOT NULL,
    source_start integer NOT NULL,
    source_end integer NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX observations_session ON observations (tenant_id, session_key, seq);

CREATE TABLE reflections (
    tenant_id text NOT NULL,
    id text NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    session_key text NOT NULL,
    content text NOT NULL,
    token_count integer NOT NULL,
    generation integer NOT NULL,
    source_start integer NOT NULL,
    source_end integer NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX reflections_session ON reflections (tenant_id, session_key, seq);

CREATE TABLE session_leases (
    tenant_id text NOT NULL,
    session_key text NOT NULL,
    owner text NOT NULL,
    expires_at double precision NOT NULL,
    PRIMARY KEY (tenant_id, session_key)
);

GRANT SELECT, INSERT, UPDATE, DELETE ON session_messages, observations, reflections,
    session_leases TO lamina_app;
ALTER TABLE session_messages ENABLE ROW LEVEL SECURITY;
ALTER TABLE session_messages FORCE ROW LEVEL SECURITY;
ALTER TABLE observations ENABLE ROW LEVEL SECURITY;
ALTER TABLE observations FORCE ROW LEVEL SECURITY;
ALTER TABLE reflections ENABLE ROW LEVEL SECURITY;
ALTER TABLE reflections FORCE ROW LEVEL SECURITY;
ALTER TABLE session_leases ENABLE ROW LEVEL SECURITY;
ALTER TABLE session_leases FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON session_messages
    USING (tenant_id = current_setting('lamina.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lamina.tenant_id', true));
CREATE POLICY tenant_isolation ON observations
    USING (tenant_id = current_setting('lamina.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lamina.tenant_id', true));
CREATE POLICY tenant_isolation ON reflections
    USING (tenant_id = current_setting('lamina.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lamina.tenant_id', true));
CREATE POLICY tenant_isolation ON session_leases
    USING (tenant_id = current_setting('lamina.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lamina.tenant_id', true));

-- Graph memory: entities and relations extracted from observations.
CREATE TABLE graph_entities (
    tenant_id text NOT NULL,
    id bigint GENERATED ALWAYS AS IDENTITY,
    name text NOT NULL,
    norm text NOT NULL,
    type text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, norm)
);
CREATE TABLE graph_relations (
    tenant_id text NOT NULL,
    id bigint GENERATED ALWAYS AS IDENTITY,
    session_key text NOT NULL,
    source_id bigint NOT NULL,
    relation text NOT NULL,
    target_id bigint NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, session_key, source_id, relation, target_id)
);
CREATE INDEX graph_relations_source ON graph_relations (tenant_id, source_id);
CREATE INDEX graph_relations_target ON graph_relations (tenant_id, target_id);
GRANT SELECT, INSERT, UPDATE, DELETE ON graph_entities, graph_relations TO lamina_app;
ALTER TABLE graph_entities ENABLE ROW LEVEL SECURITY;
ALTER TABLE graph_entities FORCE ROW LEVEL SECURITY;
ALTER TABLE graph_relations ENABLE ROW LEVEL SECURITY;
ALTER TABLE graph_relations FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON graph_entities
    USING (tenant_id = current_setting('lamina.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lamina.tenant_id', true));
CREATE POLICY tenant_isolation ON graph_relations
    USING (tenant_id = current_setting('lamina.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lamina.tenant_id', true));
