-- A conversation message's neighbourhood (lamina.memory.scoring). conversation_id and
-- conversation_position repeat metadata.conversation for the index below; context holds the
-- words a message is also found by (the two previous turns, its speaker, its date), indexed
-- at a lower weight than its own words; context_embedding (float32 bytes) the normalised sum
-- of its own and the previous turns' vectors. Messages stored before this version have no
-- neighbourhood until their conversation grows.
ALTER TABLE memories ADD COLUMN conversation_id text;
ALTER TABLE memories ADD COLUMN conversation_position bigint;
ALTER TABLE memories ADD COLUMN context text;
ALTER TABLE memories ADD COLUMN context_embedding bytea;
UPDATE memories
    SET conversation_id = metadata #>> '{conversation,id}',
        conversation_position = (metadata #>> '{conversation,position}')::numeric::bigint
    WHERE jsonb_typeof(metadata #> '{conversation,id}') = 'string'
        AND jsonb_typeof(metadata #> '{conversation,position}') = 'number';
CREATE INDEX memories_conversation ON memories (tenant_id, conversation_id, conversation_position)
    WHERE conversation_id IS NOT NULL;
ALTER TABLE memories DROP COLUMN tsv;
ALTER TABLE memories ADD COLUMN tsv tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english', content), 'A')
    || setweight(to_tsvector('english', coalesce(context, '')), 'B')) STORED;
CREATE INDEX memories_tsv ON memories USING gin (tsv);
