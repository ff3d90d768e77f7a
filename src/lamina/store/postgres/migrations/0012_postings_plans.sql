-- The postings triggers of migration 0008 read the transition tables through static SQL,
-- whose plan PL/pgSQL caches on a connection's first call: planned for the one row of a
-- first single-row UPDATE, the join of old_rows and new_rows stayed a nested loop over the
-- transition tables, quadratic in the rows a later statement changed (a 100k-row UPDATE
-- ran for over 13 minutes; 20k rows took 57 s). The statements that join a transition
-- table now run through EXECUTE: planned at each call, for the rows that call holds (a
-- hash join, linear). The statements themselves are those of migration 0008.
CREATE OR REPLACE FUNCTION lamina_terms_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE 'DELETE FROM memory_terms t USING old_rows o
        WHERE t.tenant_id = o.tenant_id AND t.memory_seq = o.seq AND o.lexicon IS NOT NULL';
    EXECUTE 'UPDATE memory_scope_stats s SET docs = s.docs - g.docs, length = s.length - g.length
        FROM (SELECT tenant_id, layer, scope_key, count(*) AS docs, sum(term_count::float8) AS length
              FROM old_rows WHERE lexicon IS NOT NULL GROUP BY 1, 2, 3) g
        WHERE s.tenant_id = g.tenant_id AND s.layer = g.layer AND s.scope_key = g.scope_key';
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION lamina_terms_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed_rows bigint;
BEGIN
    -- Only rows whose terms or scope changed: the rest keep their postings. (Counted, not
    -- EXISTS: planned for its first row, EXISTS would be a nested loop again.)
    EXECUTE 'SELECT count(*) FROM new_rows n JOIN old_rows o ON o.seq = n.seq
        WHERE n.lexicon IS DISTINCT FROM o.lexicon OR n.layer <> o.layer
            OR n.scope_key <> o.scope_key OR n.term_count <> o.term_count' INTO changed_rows;
    IF changed_rows = 0 THEN
        RETURN NULL;
    END IF;
    EXECUTE 'WITH changed AS (
            SELECT o.* FROM old_rows o JOIN new_rows n ON n.seq = o.seq
            WHERE n.lexicon IS DISTINCT FROM o.lexicon OR n.layer <> o.layer
                OR n.scope_key <> o.scope_key OR n.term_count <> o.term_count
        )
        DELETE FROM memory_terms t USING changed o
        WHERE t.tenant_id = o.tenant_id AND t.memory_seq = o.seq';
    EXECUTE 'WITH changed AS (
            SELECT o.* FROM old_rows o JOIN new_rows n ON n.seq = o.seq
            WHERE n.lexicon IS DISTINCT FROM o.lexicon OR n.layer <> o.layer
                OR n.scope_key <> o.scope_key OR n.term_count <> o.term_count
        )
        UPDATE memory_scope_stats s SET docs = s.docs - g.docs, length = s.length - g.length
        FROM (SELECT tenant_id, layer, scope_key, count(*) AS docs, sum(term_count::float8) AS length
              FROM changed WHERE lexicon IS NOT NULL GROUP BY 1, 2, 3) g
        WHERE s.tenant_id = g.tenant_id AND s.layer = g.layer AND s.scope_key = g.scope_key';
    EXECUTE 'WITH changed AS (
            SELECT n.* FROM old_rows o JOIN new_rows n ON n.seq = o.seq
            WHERE n.lexicon IS DISTINCT FROM o.lexicon OR n.layer <> o.layer
                OR n.scope_key <> o.scope_key OR n.term_count <> o.term_count
        )
        INSERT INTO memory_terms (tenant_id, layer, scope_key, term, memory_seq, tf, doc_length)
        SELECT n.tenant_id, n.layer, n.scope_key, split_part(p, '':'', 1), n.seq,
               split_part(p, '':'', 2)::real, n.term_count
        FROM changed n, regexp_split_to_table(n.lexicon, '' '') p
        WHERE n.lexicon IS NOT NULL AND p <> ''''';
    EXECUTE 'WITH changed AS (
            SELECT n.* FROM old_rows o JOIN new_rows n ON n.seq = o.seq
            WHERE n.lexicon IS DISTINCT FROM o.lexicon OR n.layer <> o.layer
                OR n.scope_key <> o.scope_key OR n.term_count <> o.term_count
        )
        INSERT INTO memory_scope_stats AS s (tenant_id, layer, scope_key, docs, length)
        SELECT tenant_id, layer, scope_key, count(*), sum(term_count::float8)
        FROM changed WHERE lexicon IS NOT NULL GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (tenant_id, layer, scope_key) DO UPDATE
        SET docs = s.docs + excluded.docs, length = s.length + excluded.length';
    RETURN NULL;
END $$;
