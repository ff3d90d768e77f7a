-- The neighbourhood vector filled by migration 16 takes the old column's name, and the
-- type of `embedding` (`vector(n)` for the store's n, or dimensionless while a change of
-- dimensions is under way: lamina.store.postgres.vectors types both).
ALTER TABLE memories DROP COLUMN context_embedding;
ALTER TABLE memories RENAME COLUMN context_vector TO context_embedding;
DO $$
DECLARE
    own text;
BEGIN
    SELECT format_type(atttypid, atttypmod) INTO own FROM pg_attribute
        WHERE attrelid = 'memories'::regclass AND attname = 'embedding';
    EXECUTE format('ALTER TABLE memories ALTER COLUMN context_embedding TYPE %s', own);
END
$$;
