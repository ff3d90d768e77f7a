-- Tag filters (metadata.tags ?| array[...]) can use an index instead of reading every row of
-- a scope.
CREATE INDEX memories_tags ON memories USING gin ((metadata -> 'tags'));
