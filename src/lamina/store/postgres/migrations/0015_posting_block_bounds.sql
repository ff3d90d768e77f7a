-- The block renewal of migration 0014 read a block's postings through
-- `t.term = b.term AND t.memory_seq >= b.low AND t.memory_seq < b.high`, which two indexes
-- of memory_terms can serve: the primary key (tenant, layer, scope, term, memory_seq: the
-- block's own postings) and memory_terms_memory (tenant, memory_seq: every posting of every
-- term and scope in those 512 sequence numbers, filtered). On a table not analyzed yet (a new
-- database, a bulk load or an import into one) the planner rates both at one row and takes
-- the smaller index, and PL/pgSQL keeps that plan: each block then read ~1,600 rows to keep a
-- few, and a 200-row INSERT of memories spent 0.5-1 s in this trigger (150-230 memories/s;
-- with the primary key it is ~70 ms). The bounds are now row comparisons on (term,
-- memory_seq), which only the primary key can take as index conditions (they start at its
-- fourth column after three equalities; memory_terms_memory holds no term), so the plan no
-- longer depends on statistics. Both operators are leakproof: under row-level security they
-- stay index conditions. The statements are otherwise those of migration 0014.
CREATE OR REPLACE FUNCTION lamina_postings_renew() RETURNS trigger LANGUAGE plpgsql AS $$
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
                    AND (t.term, t.memory_seq) >= (b.term, b.low)
                    AND (t.term, t.memory_seq) < (b.term, b.high)
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
                            AND (t.term, t.memory_seq) >= (k.term, k.low)
                            AND (t.term, t.memory_seq) < (k.term, k.high));
        END LOOP;
    END IF;
    RETURN NULL;
END $$;
