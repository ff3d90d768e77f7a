-- Conversation positions (memory.add_messages), tenant-isolated by row-level security like
-- every table. next_position is the next message's position; it only grows (deleting
-- memories never frees a position). Conversations stored before this version continue
-- after their last message.
CREATE TABLE conversations (
    tenant_id text NOT NULL,
    conversation_id text NOT NULL,
    next_position bigint NOT NULL,
    PRIMARY KEY (tenant_id, conversation_id)
);
INSERT INTO conversations (tenant_id, conversation_id, next_position)
    SELECT tenant_id, metadata #>> '{conversation,id}',
        max((metadata #>> '{conversation,position}')::numeric)::bigint + 1
    FROM memories
    WHERE jsonb_typeof(metadata #> '{conversation,id}') = 'string'
        AND jsonb_typeof(metadata #> '{conversation,position}') = 'number'
        AND (metadata #>> '{conversation,position}')::numeric >= 0
    GROUP BY 1, 2;

GRANT SELECT, INSERT, UPDATE, DELETE ON conversations TO lamina_app;
ALTER TABLE conversations ENABLE ROW LEVEL SECURITY;
ALTER TABLE conversations FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON conversations
    USING (tenant_id = current_setting('lamina.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lamina.tenant_id', true));
