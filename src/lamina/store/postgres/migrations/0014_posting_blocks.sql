-- Keyword search reads postings in blocks (docs/postgresql.md, "Keyword search"): one row per
-- (scope, term, block of 512 memory sequence numbers) holding that block's postings of the
-- term packed as bytes, 16 per memory in sequence order: memory_seq (int8), tf (float4),
-- doc_length (float4), big-endian (int8send, float4send). A term found in 10,000 memories of a
-- scope is then read as at most ~200 rows instead of 10,000 index entries.
-- memory_terms stays the source of truth (one row per memory and term, maintained by the
-- triggers of migration 0008); statement triggers on it renew the blocks a statement touched.
CREATE TABLE memory_postings (
    tenant_id text NOT NULL,
    layer text NOT NULL,
    scope_key text NOT NULL,
    term text NOT NULL,
    block bigint NOT NULL,
    postings bytea NOT NULL,
    PRIMARY KEY (tenant_id, layer, scope_key, term, block)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON memory_postings TO lamina_app;
ALTER TABLE memory_postings ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_postings FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memory_postings
    USING (tenant_id = current_setting('lamina.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lamina.tenant_id', true));

-- Renew the blocks holding the postings in ``touched`` (the transition table of the statement
-- that changed memory_terms). Writers in one scope take turns on the scope's statistics row
-- first (every write there updates that row anyway, so this adds no waiting): each statement
-- below then runs on a snapshot holding every earlier writer's committed postings, and no
-- block is rebuilt from a view that misses a concurrent writer's rows. Every statement reaches
-- memory_terms and memory_postings through their primary keys, one block at a time (scalar
-- subqueries and ON CONFLICT), whatever the planner guesses of the transition table's size:
-- the cost follows the blocks touched, never the table. The block bounds are computed
-- before they meet memory_terms: under row-level security only leakproof operators (not
-- the shift) may become index conditions.
CREATE FUNCTION lamina_postings_renew() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    k record;
BEGIN
    FOR k IN SELECT DISTINCT tenant_id, layer, scope_key FROM touched ORDER BY 1, 2, 3 LOOP
        INSERT INTO memory_scope_stats (tenant_id, layer, scope_key, docs, length)
            VALUES (k.tenant_id, k.layer, k.scope_key, 0, 0)
            ON CONFLICT (tenant_id, layer, scope_key) DO NOTHING;
        PERFORM 1 FROM memory_scope_stats
            WHERE tenant_id = k.tenant_id AND layer = k.layer AND scope_key = k.scope_key
            FOR UPDATE;
    END LOOP;
    WITH blocks AS MATERIALIZED (
        SELECT b.tenant_id, b.layer, b.scope_key, b.term, b.block, (
                SELECT string_agg(int8send(t.memory_seq) || float4send(t.tf)
                                  || float4send(t.doc_length), ''::bytea ORDER BY t.memory_seq)
                FROM memory_terms t
                WHERE t.tenant_id = b.tenant_id AND t.layer = b.layer
                    AND t.scope_key = b.scope_key AND t.term = b.term
                    AND t.memory_seq >= b.low AND t.memory_seq < b.high
            ) AS postings
        FROM (SELECT DISTINCT tenant_id, layer, scope_key, term, memory_seq >> 9 AS block,
                     (memory_seq >> 9) << 9 AS low, ((memory_seq >> 9) + 1) << 9 AS high
              FROM touched) b
    )
    INSERT INTO memory_postings AS p (tenant_id, layer, scope_key, term, block, postings)
        SELECT tenant_id, layer, scope_key, term, block, postings FROM blocks
        WHERE postings IS NOT NULL
        ON CONFLICT (tenant_id, layer, scope_key, term, block)
        DO UPDATE SET postings = excluded.postings;
    IF TG_OP = 'DELETE' THEN  -- blocks left without postings
        FOR k IN SELECT DISTINCT tenant_id, layer, scope_key, term, memory_seq >> 9 AS block,
                        (memory_seq >> 9) << 9 AS low, ((memory_seq >> 9) + 1) << 9 AS high
                 FROM touched LOOP
            DELETE FROM memory_postings p
                WHERE p.tenant_id = k.tenant_id AND p.layer = k.layer
                    AND p.scope_key = k.scope_key AND p.term = k.term AND p.block = k.block
                    AND NOT EXISTS (SELECT 1 FROM memory_terms t
                        WHERE t.tenant_id = k.tenant_id AND t.layer = k.layer
                            AND t.scope_key = k.scope_key AND t.term = k.term
                            AND t.memory_seq >= k.low AND t.memory_seq < k.high);
        END LOOP;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER memory_terms_blocks_insert AFTER INSERT ON memory_terms
    REFERENCING NEW TABLE AS touched FOR EACH STATEMENT EXECUTE FUNCTION lamina_postings_renew();
CREATE TRIGGER memory_terms_blocks_delete AFTER DELETE ON memory_terms
    REFERENCING OLD TABLE AS touched FOR EACH STATEMENT EXECUTE FUNCTION lamina_postings_renew();

-- The blocks of the postings stored before this version.
ALTER TABLE memory_terms NO FORCE ROW LEVEL SECURITY;
ALTER TABLE memory_postings NO FORCE ROW LEVEL SECURITY;
INSERT INTO memory_postings (tenant_id, layer, scope_key, term, block, postings)
    SELECT tenant_id, layer, scope_key, term, memory_seq >> 9,
           string_agg(int8send(memory_seq) || float4send(tf) || float4send(doc_length),
                      ''::bytea ORDER BY memory_seq)
    FROM memory_terms GROUP BY 1, 2, 3, 4, 5;
ALTER TABLE memory_terms FORCE ROW LEVEL SECURITY;
ALTER TABLE memory_postings FORCE ROW LEVEL SECURITY;
