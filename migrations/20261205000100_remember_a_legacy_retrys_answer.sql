-- A 2025-11-25 client's retry of "connect another account" carries no
-- requestState to name its ticket: the ticket is found by who asked
-- (principal, client, provider) among the add-account tickets not yet
-- answered, and `answered_at` records that a retry completed with it, so
-- that a later request for yet another account starts afresh.
ALTER TABLE connect_tickets ADD COLUMN answered_at timestamptz;
-- Partial: add-account tickets are rare, so an ordinary ask pays no insert
-- into this index, and building it reads a table of live tickets only
-- (the sweeper deletes the rest). Not CONCURRENTLY: that waits for every
-- other transaction's snapshot, among them a second instance's wait for
-- the migration lock this one holds, which deadlocks.
CREATE INDEX connect_tickets_add_account
    ON connect_tickets (issuer, subject, client_id, provider, created_at)
    WHERE add_account;
