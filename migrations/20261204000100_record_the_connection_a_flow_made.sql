-- The connection a connect flow stored, set in the same transaction: a
-- reload of the provider's callback page shows exactly that account (or,
-- after a failed code exchange, nothing connected), never another one of
-- the user's. Deleting the connection forgets it; the partial index keeps
-- that delete from reading the whole flow table.
ALTER TABLE oauth_flows
    ADD COLUMN connection_id uuid REFERENCES connections (id) ON DELETE SET NULL;
CREATE INDEX oauth_flows_connection ON oauth_flows (connection_id) WHERE connection_id IS NOT NULL;
