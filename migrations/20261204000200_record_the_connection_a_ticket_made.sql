-- The connection a connect ticket's flow (or pasted credential) stored, set
-- in the transaction that stored it: the MCP client's retry after "connect
-- another account" completes with exactly that account, never with one of
-- the user's older accounts that merely changed since (a refresh, a
-- rename). Deleting the connection forgets it; the partial index keeps that
-- delete from reading the whole ticket table.
ALTER TABLE connect_tickets
    ADD COLUMN stored_connection_id uuid REFERENCES connections (id) ON DELETE SET NULL;
CREATE INDEX connect_tickets_stored_connection ON connect_tickets (stored_connection_id)
    WHERE stored_connection_id IS NOT NULL;
