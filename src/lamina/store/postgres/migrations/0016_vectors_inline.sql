-- A memory's neighbourhood vector becomes a pgvector value, like its own vector, so that a
-- search computes both cosines in the database and reads a candidate's few floats instead
-- of its two vectors (~3 kB a candidate, a few hundred candidates a search). The column is
-- filled from the float32 bytes of `context_embedding` by the migration code (db.py), the
-- same floats; migration 17 then drops the old column, gives this one its name and the
-- type of `embedding` (its dimensions, whatever model the store is opened with).
--
-- Both vectors stay in the heap row, not in TOAST. With the default threshold (~2 kB)
-- PostgreSQL moved them out of line, and every candidate a search read fetched them through
-- the TOAST index (4,178 buffers for a 675-memory scope's exact scan, against 392 inline;
-- 2.7 ms against 1.2 ms). MAIN keeps a column inline unless nothing else is left to move;
-- a row is toasted only above 4,080 bytes (two rows still fit a page), and then its text and
-- JSON go first. Rows stored before keep their own vector's TOAST pointer until rewritten
-- (`lamina db copy`, or an export and import).
--
-- The upgrade rewrites every conversation message's row, holding the table's lock until it
-- commits (about 4 s for 4,000 messages with the vector index kept; with more than a
-- quarter of the table to rewrite, the index is built again instead). `VACUUM memories`
-- afterwards gives the old rows' space back to new rows.
ALTER TABLE memories
    ADD COLUMN context_vector vector,
    ALTER COLUMN embedding SET STORAGE MAIN,
    ALTER COLUMN context_vector SET STORAGE MAIN,
    SET (toast_tuple_target = 4080);
