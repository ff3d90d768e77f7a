-- Under row-level security PostgreSQL only uses an index for a condition whose operator is
-- LEAKPROOF; the text-search match (tsvector @@ tsquery) is not marked so, which turns every
-- keyword search into a scan of the whole table. ts_match_vq reports nothing about the rows
-- it rejects (it raises no data-dependent errors), so it is marked LEAKPROOF here. Only a
-- superuser may do this; without one the keyword search stays correct, only slower, and
-- docs/postgresql.md tells the administrator the statement to run.
DO $$
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF;
    ELSE
        RAISE NOTICE 'lamina: run "ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF" as a superuser so that keyword search can use its index';
    END IF;
END
$$;
