-- The embedding cache holds no second copy of a stored memory's vector. A text a memory holds
-- is looked up through that memory (lamina.store.sql.embedding_cache); the cached rows of
-- such texts go (the cache's key of a text: the hex SHA-256 of its UTF-8 bytes), read across
-- tenants by the owner (row-level security is forced on the tables again after).
ALTER TABLE memories NO FORCE ROW LEVEL SECURITY;
ALTER TABLE embedding_cache NO FORCE ROW LEVEL SECURITY;
DELETE FROM embedding_cache WHERE (tenant_id, model, content_hash) IN (
    SELECT tenant_id, embedding_model, encode(sha256(convert_to(content, 'UTF8')), 'hex')
    FROM memories WHERE embedding IS NOT NULL AND embedding_model IS NOT NULL
);
ALTER TABLE memories FORCE ROW LEVEL SECURITY;
ALTER TABLE embedding_cache FORCE ROW LEVEL SECURITY;
