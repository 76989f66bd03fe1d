-- When a connection's tokens were last stored (connected or refreshed).
-- The refresh margin is half a token's lifetime for short-lived tokens, and
-- was measured from updated_at, which a rename, a parameter change or a
-- status change also moves: a token renamed a second before it expired was
-- used with under a second left. Null for rows stored before this column
-- existed, which go on from updated_at until their next refresh (no
-- rewrite of the table to fill it).
ALTER TABLE connections ADD COLUMN tokens_stored_at timestamptz;
