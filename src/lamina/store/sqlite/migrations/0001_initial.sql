-- lamina embedded store, schema version 1.
CREATE TABLE store_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE memories (
    pk INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id TEXT NOT NULL,
    id TEXT NOT NULL,
    layer TEXT NOT NULL,
    scope_key TEXT NOT NULL,
    identifiers TEXT NOT NULL,
    content TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    embedding BLOB,
    -- Keyword-index terms of content: "stem:count ..." (lamina.text.analyze).
    lexicon TEXT NOT NULL DEFAULT '',
    embedding_model TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (tenant_id, id)
);
CREATE INDEX memories_scope ON memories (tenant_id, layer, scope_key, pk);

-- Every change to a memory's vector, terms or scope is logged, so that each process's
-- in-memory vector and keyword indexes can catch up with writes made by other processes.
CREATE TABLE index_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_pk INTEGER NOT NULL
);

CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO index_log (memory_pk) VALUES (new.pk);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO index_log (memory_pk) VALUES (old.pk);
END;
CREATE TRIGGER memories_au_index AFTER UPDATE OF embedding, lexicon, layer, scope_key ON memories BEGIN
    INSERT INTO index_log (memory_pk) VALUES (new.pk);
END;

CREATE TABLE memory_history (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    operation TEXT NOT NULL,
    layer TEXT NOT NULL,
    old_content TEXT,
    new_content TEXT,
    old_metadata TEXT,
    new_metadata TEXT,
    actor TEXT,
    at TEXT NOT NULL
);
CREATE INDEX memory_history_memory ON memory_history (tenant_id, memory_id, seq);

CREATE TABLE embedding_cache (
    tenant_id TEXT NOT NULL,
    model TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, model, content_hash)
) WITHOUT ROWID;

CREATE TABLE hierarchy (
    tenant_id TEXT NOT NULL,
    level TEXT NOT NULL,
    child_id TEXT NOT NULL,
    parent_id TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, level, child_id)
) WITHOUT ROWID;
