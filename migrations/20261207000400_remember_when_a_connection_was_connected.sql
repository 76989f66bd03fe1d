-- When the person last connected the account (tokens from an
-- authorization stored), apart from a refresh's tokens and from when the
-- row was first made: a reconnect stores its tokens into the row it
-- already had. A revocation owed for tokens whose account was never read
-- spares a connection the person made since; a reconnect into the old
-- row is one, and neither `created_at` (older) nor `tokens_stored_at`
-- (which every refresh moves) can tell it. NULL for the rows connected
-- before: read as `created_at`, as before. Adds a column only (no
-- rewrite); releases before it never set it, which reads as before.
ALTER TABLE connections ADD COLUMN connected_at timestamptz;
