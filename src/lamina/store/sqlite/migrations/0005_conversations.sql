-- lamina embedded store, schema version 5: conversation positions (memory.add_messages).
-- next_position is the next message's position; it only grows (deleting memories never
-- frees a position). Conversations stored before this version continue after their last.
CREATE TABLE conversations (
    tenant_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    next_position INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, conversation_id)
);
INSERT INTO conversations (tenant_id, conversation_id, next_position)
    SELECT tenant_id, json_extract(metadata, '$.conversation.id'),
        max(json_extract(metadata, '$.conversation.position')) + 1
    FROM memories
    WHERE json_type(metadata, '$.conversation.id') = 'text'
        AND json_type(metadata, '$.conversation.position') = 'integer'
        AND json_extract(metadata, '$.conversation.position') >= 0
    GROUP BY 1, 2;
