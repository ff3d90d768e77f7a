-- One keyword ranking for both stores (lamina.memory.scoring): BM25 over terms computed in
-- Python (lexicon, "term:count ...", as in the embedded store), kept as postings per scope
-- by statement triggers, with per-scope document counts and lengths.
-- A conversation message's neighbourhood: conversation_id and conversation_position repeat
-- metadata.conversation for the index below; context holds the words a message is also
-- found by (the two previous turns, its speaker, its date; in lexicon at half weight);
-- context_embedding (float32 bytes) the normalised sum of its own and the previous turns'
-- vectors. Messages stored before this version have no neighbourhood.
-- Rows stored before this version get their lexicon from lamina when it applies this
-- migration (lamina.store.postgres.db).
ALTER TABLE memories ADD COLUMN conversation_id text;
ALTER TABLE memories ADD COLUMN conversation_position bigint;
ALTER TABLE memories ADD COLUMN context text;
ALTER TABLE memories ADD COLUMN context_embedding bytea;
ALTER TABLE memories ADD COLUMN lexicon text;
ALTER TABLE memories ADD COLUMN term_count real NOT NULL DEFAULT 0;
UPDATE memories
    SET conversation_id = metadata #>> '{conversation,id}',
        conversation_position = (metadata #>> '{conversation,position}')::numeric::bigint
    WHERE jsonb_typeof(metadata #> '{conversation,id}') = 'string'
        AND jsonb_typeof(metadata #> '{conversation,position}') = 'number';
CREATE INDEX memories_conversation ON memories (tenant_id, conversation_id, conversation_position)
    WHERE conversation_id IS NOT NULL;
CREATE INDEX memories_seq ON memories (tenant_id, seq);
ALTER TABLE memories DROP COLUMN tsv;

-- One row per (memory, term): the term's count in the memory and the memory's length.
CREATE TABLE memory_terms (
    tenant_id text NOT NULL,
    layer text NOT NULL,
    scope_key text NOT NULL,
    term text NOT NULL,
    memory_seq bigint NOT NULL,
    tf real NOT NULL,
    doc_length real NOT NULL,
    -- tf and doc_length ride in the index: a search reads postings without the heap.
    PRIMARY KEY (tenant_id, layer, scope_key, term, memory_seq) INCLUDE (tf, doc_length)
);
CREATE INDEX memory_terms_memory ON memory_terms (tenant_id, memory_seq);
-- Documents and their total length per scope (BM25's N and average length).
CREATE TABLE memory_scope_stats (
    tenant_id text NOT NULL,
    layer text NOT NULL,
    scope_key text NOT NULL,
    docs bigint NOT NULL,
    length double precision NOT NULL,
    PRIMARY KEY (tenant_id, layer, scope_key)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON memory_terms, memory_scope_stats TO lamina_app;
ALTER TABLE memory_terms ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_terms FORCE ROW LEVEL SECURITY;
ALTER TABLE memory_scope_stats ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_scope_stats FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memory_terms
    USING (tenant_id = current_setting('lamina.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lamina.tenant_id', true));
CREATE POLICY tenant_isolation ON memory_scope_stats
    USING (tenant_id = current_setting('lamina.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lamina.tenant_id', true));

-- Postings and statistics follow every statement on memories (rows in, rows out, rows whose
-- terms or scope changed), set-wise from the transition tables.
CREATE FUNCTION lamina_terms_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_terms t USING old_rows o
        WHERE t.tenant_id = o.tenant_id AND t.memory_seq = o.seq AND o.lexicon IS NOT NULL;
    UPDATE memory_scope_stats s SET docs = s.docs - g.docs, length = s.length - g.length
        FROM (SELECT tenant_id, layer, scope_key, count(*) AS docs, sum(term_count::float8) AS length
              FROM old_rows WHERE lexicon IS NOT NULL GROUP BY 1, 2, 3) g
        WHERE s.tenant_id = g.tenant_id AND s.layer = g.layer AND s.scope_key = g.scope_key;
    RETURN NULL;
END $$;
CREATE FUNCTION lamina_terms_in() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_terms (tenant_id, layer, scope_key, term, memory_seq, tf, doc_length)
        SELECT n.tenant_id, n.layer, n.scope_key, split_part(p, ':', 1), n.seq,
               split_part(p, ':', 2)::real, n.term_count
        FROM new_rows n, regexp_split_to_table(n.lexicon, ' ') p
        WHERE n.lexicon IS NOT NULL AND p <> '';
    INSERT INTO memory_scope_stats AS s (tenant_id, layer, scope_key, docs, length)
        SELECT tenant_id, layer, scope_key, count(*), sum(term_count::float8)
        FROM new_rows WHERE lexicon IS NOT NULL GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (tenant_id, layer, scope_key) DO UPDATE
        SET docs = s.docs + excluded.docs, length = s.length + excluded.length;
    RETURN NULL;
END $$;
CREATE FUNCTION lamina_terms_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Only rows whose terms or scope changed: the rest keep their postings.
    PERFORM 1 FROM new_rows n JOIN old_rows o ON o.seq = n.seq
        WHERE n.lexicon IS DISTINCT FROM o.lexicon OR n.layer <> o.layer
            OR n.scope_key <> o.scope_key OR n.term_count <> o.term_count
        LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    WITH changed AS (
        SELECT o.* FROM old_rows o JOIN new_rows n ON n.seq = o.seq
        WHERE n.lexicon IS DISTINCT FROM o.lexicon OR n.layer <> o.layer
            OR n.scope_key <> o.scope_key OR n.term_count <> o.term_count
    )
    DELETE FROM memory_terms t USING changed o
        WHERE t.tenant_id = o.tenant_id AND t.memory_seq = o.seq;
    WITH changed AS (
        SELECT o.* FROM old_rows o JOIN new_rows n ON n.seq = o.seq
        WHERE n.lexicon IS DISTINCT FROM o.lexicon OR n.layer <> o.layer
            OR n.scope_key <> o.scope_key OR n.term_count <> o.term_count
    )
    UPDATE memory_scope_stats s SET docs = s.docs - g.docs, length = s.length - g.length
        FROM (SELECT tenant_id, layer, scope_key, count(*) AS docs, sum(term_count::float8) AS length
              FROM changed WHERE lexicon IS NOT NULL GROUP BY 1, 2, 3) g
        WHERE s.tenant_id = g.tenant_id AND s.layer = g.layer AND s.scope_key = g.scope_key;
    WITH changed AS (
        SELECT n.* FROM new_rows n JOIN old_rows o ON o.seq = n.seq
        WHERE n.lexicon IS DISTINCT FROM o.lexicon OR n.layer <> o.layer
            OR n.scope_key <> o.scope_key OR n.term_count <> o.term_count
    )
    INSERT INTO memory_terms (tenant_id, layer, scope_key, term, memory_seq, tf, doc_length)
        SELECT n.tenant_id, n.layer, n.scope_key, split_part(p, ':', 1), n.seq,
               split_part(p, ':', 2)::real, n.term_count
        FROM changed n, regexp_split_to_table(n.lexicon, ' ') p
        WHERE n.lexicon IS NOT NULL AND p <> '';
    WITH changed AS (
        SELECT n.* FROM new_rows n JOIN old_rows o ON o.seq = n.seq
        WHERE n.lexicon IS DISTINCT FROM o.lexicon OR n.layer <> o.layer
            OR n.scope_key <> o.scope_key OR n.term_count <> o.term_count
    )
    INSERT INTO memory_scope_stats AS s (tenant_id, layer, scope_key, docs, length)
        SELECT tenant_id, layer, scope_key, count(*), sum(term_count::float8)
        FROM changed WHERE lexicon IS NOT NULL GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (tenant_id, layer, scope_key) DO UPDATE
        SET docs = s.docs + excluded.docs, length = s.length + excluded.length;
    RETURN NULL;
END $$;
CREATE TRIGGER memories_terms_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION lamina_terms_out();
CREATE TRIGGER memories_terms_insert AFTER INSERT ON memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION lamina_terms_in();
CREATE TRIGGER memories_terms_update AFTER UPDATE ON memories
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION lamina_terms_changed();
