-- lamina embedded store, schema version 8: forgetting (memory.delete, memory.delete_all).
-- When memories are deleted, the embedding cache drops the vectors of texts no memory still
-- holds; this index finds the memories holding a text by its first 64 characters (the
-- statement then compares the whole text), so that check never scans a tenant's memories.
CREATE INDEX memories_content_prefix ON memories (tenant_id, substr(content, 1, 64));
