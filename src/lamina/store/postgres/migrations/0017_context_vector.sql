-- The neighbourhood vector filled by migration 16 takes the old column's name.
ALTER TABLE memories DROP COLUMN context_embedding;
ALTER TABLE memories RENAME COLUMN context_vector TO context_embedding;
