-- Vectors in the heap row, not in TOAST. A memory's row holds two 384-float vectors
-- (embedding and context_embedding, ~1.5 kB each), so with the default threshold (~2 kB)
-- PostgreSQL moved them out of line: every candidate a search scores then read its vectors
-- through the TOAST index (4,178 buffers for a 675-memory scope's exact scan, against 392
-- inline; 2.7 ms against 1.2 ms). MAIN keeps a column inline unless nothing else is left to
-- move; a row is toasted only above 4,080 bytes (two rows still fit a page), and then its
-- text and JSON go first. Rows stored before this keep their TOAST pointers until rewritten
-- (`lamina db copy`, or an export and import); only the catalog changes here.
ALTER TABLE memories
    ALTER COLUMN embedding SET STORAGE MAIN,
    ALTER COLUMN context_embedding SET STORAGE MAIN,
    SET (toast_tuple_target = 4080);
