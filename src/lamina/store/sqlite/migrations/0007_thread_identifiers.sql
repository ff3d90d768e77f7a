-- lamina embedded store, schema version 7: a thread's identifiers (user_id, project_id, ...)
-- live as long as the thread, apart from its conversation context, which expires sooner
-- (server.state_ttl). Threads stored before keep the identifiers their context holds.
ALTER TABLE a2a_threads ADD COLUMN identifiers TEXT NOT NULL DEFAULT '{}';
UPDATE a2a_threads SET identifiers = json_extract(context, '$.identifiers')
    WHERE json_valid(context) AND json_type(context, '$.identifiers') = 'object';
