-- lamina embedded store, schema version 12: memories by user_id in each layer. The agent and
-- session memories of a user carry its id after their own in the scope key, so without this
-- index list_all, count_all, delete_all and owners by user_id read every agent and session
-- memory of the tenant. The expression is the one the queries use (json_text).
CREATE INDEX IF NOT EXISTS memories_user ON memories (tenant_id, layer, json_extract(identifiers, '$.user_id'));
