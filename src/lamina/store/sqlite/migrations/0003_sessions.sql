-- lamina embedded store, schema version 3: session messages and observational memory.
CREATE TABLE session_messages (
    pk INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id TEXT NOT NULL,
    session_key TEXT NOT NULL,
    idx INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    tool_calls TEXT NOT NULL DEFAULT '[]',
    token_count INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (tenant_id, session_key, idx)
);

CREATE TABLE observations (
    pk INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id TEXT NOT NULL,
    session_key TEXT NOT NULL,
    id TEXT NOT NULL,
    content TEXT NOT NULL,
    token_count INTEGER NOT NULL,
    source_start INTEGER NOT NULL,
    source_end INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (tenant_id, id)
);
CREATE INDEX observations_session ON observations (tenant_id, session_key, pk);

CREATE TABLE reflections (
    pk INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id TEXT NOT NULL,
    session_key TEXT NOT NULL,
    id TEXT NOT NULL,
    content TEXT NOT NULL,
    token_count INTEGER NOT NULL,
    generation INTEGER NOT NULL,
    source_start INTEGER NOT NULL,
    source_end INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (tenant_id, id)
);
CREATE INDEX reflections_session ON reflections (tenant_id, session_key, pk);

-- Who is observing a session right now (across processes): a lease that expires.
CREATE TABLE session_leases (
    tenant_id TEXT NOT NULL,
    session_key TEXT NOT NULL,
    owner TEXT NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (tenant_id, session_key)
);

-- Graph memory: entities and relations extracted from observations.
CREATE TABLE graph_entities (
    pk INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id TEXT NOT NULL,
    name TEXT NOT NULL,
    norm TEXT NOT NULL,
    type TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    UNIQUE (tenant_id, norm)
);
CREATE TABLE graph_relations (
    pk INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id TEXT NOT NULL,
    session_key TEXT NOT NULL,
    source_pk INTEGER NOT NULL,
    relation TEXT NOT NULL,
    target_pk INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (tenant_id, session_key, source_pk, relation, target_pk)
);
CREATE INDEX graph_relations_source ON graph_relations (tenant_id, source_pk);
CREATE INDEX graph_relations_target ON graph_relations (tenant_id, target_pk);
