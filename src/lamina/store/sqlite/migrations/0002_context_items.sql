-- lamina embedded store, schema version 2: the searchable context layers (user knowledge,
-- agent learnings, skill patterns, external references) in one table, one row per version.
CREATE TABLE context_items (
    pk INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    key TEXT NOT NULL,
    version INTEGER NOT NULL,
    is_latest INTEGER NOT NULL,
    category TEXT,
    content TEXT NOT NULL,
    data TEXT NOT NULL DEFAULT '{}',
    tags TEXT NOT NULL DEFAULT '[]',
    embedding BLOB,
    lexicon TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (tenant_id, kind, id),
    UNIQUE (tenant_id, kind, key, version)
);
CREATE INDEX context_items_latest ON context_items (tenant_id, kind, is_latest, pk);

-- As index_log for memories: every change a search index must see, for every process.
CREATE TABLE context_index_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    item_pk INTEGER NOT NULL
);
CREATE TRIGGER context_items_ai AFTER INSERT ON context_items BEGIN
    INSERT INTO context_index_log (item_pk) VALUES (new.pk);
END;
CREATE TRIGGER context_items_ad AFTER DELETE ON context_items BEGIN
    INSERT INTO context_index_log (item_pk) VALUES (old.pk);
END;
CREATE TRIGGER context_items_au AFTER UPDATE OF embedding, lexicon, is_latest ON context_items BEGIN
    INSERT INTO context_index_log (item_pk) VALUES (new.pk);
END;
