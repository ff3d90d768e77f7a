-- lamina embedded store, schema version 9: time and write-time dedup (docs/memory.md).
-- event_at: when the event a memory records happened (a message's timestamp, else the
-- creation time); valid_from / valid_until: the interval the fact holds (NULL: unbounded;
-- invalidating a fact sets valid_until); expires_at: when a memory with a time to live
-- stops being returned (the expiry job then removes it); content_key: the hash of the
-- normalised content of a memory written with add / bulk_add (NULL for conversation
-- messages, which are never deduplicated). Times are ISO-8601 text with microseconds in UTC,
-- so that they compare as text. Rows stored before this version get their content_key from
-- lamina when it applies this migration (lamina.store.sqlite.db).
ALTER TABLE memories ADD COLUMN event_at TEXT;
ALTER TABLE memories ADD COLUMN valid_from TEXT;
ALTER TABLE memories ADD COLUMN valid_until TEXT;
ALTER TABLE memories ADD COLUMN expires_at TEXT;
ALTER TABLE memories ADD COLUMN content_key TEXT;
UPDATE memories SET event_at = created_at;
UPDATE memories
    SET event_at = CASE
        WHEN length(json_extract(metadata, '$.conversation.timestamp')) = 25
            THEN substr(json_extract(metadata, '$.conversation.timestamp'), 1, 19) || '.000000'
                || substr(json_extract(metadata, '$.conversation.timestamp'), 20)
        ELSE json_extract(metadata, '$.conversation.timestamp') END
    WHERE json_type(metadata, '$.conversation.timestamp') = 'text'
        AND length(json_extract(metadata, '$.conversation.timestamp')) IN (25, 32);
CREATE INDEX memories_event ON memories (tenant_id, layer, scope_key, event_at);
CREATE INDEX memories_expiry ON memories (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX memories_content_key ON memories (tenant_id, layer, scope_key, content_key)
    WHERE content_key IS NOT NULL;
