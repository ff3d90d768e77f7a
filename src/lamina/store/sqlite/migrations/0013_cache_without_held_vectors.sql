-- lamina embedded store, schema version 13: the embedding cache holds no second copy of a
-- stored memory's vector. A text a memory holds is looked up through that memory
-- (lamina.store.sql.embedding_cache); the cached rows of such texts go
-- (lamina_sha256: the cache's key of a text, registered on every connection).
DELETE FROM embedding_cache WHERE (tenant_id, model, content_hash) IN (
    SELECT tenant_id, embedding_model, lamina_sha256(content) FROM memories
    WHERE embedding IS NOT NULL AND embedding_model IS NOT NULL
);
