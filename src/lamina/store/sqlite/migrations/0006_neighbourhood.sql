-- lamina embedded store, schema version 6: a conversation message's neighbourhood
-- (lamina.memory.scoring). conversation_id and conversation_position repeat
-- metadata.conversation for the index below; context holds the words a message is also
-- found by (the two previous turns, its speaker, its date: part of lexicon, at half weight);
-- context_embedding the normalised sum of its own and the previous turns' vectors.
-- Messages stored before this version have no neighbourhood.
ALTER TABLE memories ADD COLUMN conversation_id TEXT;
ALTER TABLE memories ADD COLUMN conversation_position INTEGER;
ALTER TABLE memories ADD COLUMN context TEXT;
ALTER TABLE memories ADD COLUMN context_embedding BLOB;
UPDATE memories
    SET conversation_id = json_extract(metadata, '$.conversation.id'),
        conversation_position = json_extract(metadata, '$.conversation.position')
    WHERE json_type(metadata, '$.conversation.id') = 'text'
        AND json_type(metadata, '$.conversation.position') = 'integer';
CREATE INDEX memories_conversation ON memories (tenant_id, conversation_id, conversation_position)
    WHERE conversation_id IS NOT NULL;
