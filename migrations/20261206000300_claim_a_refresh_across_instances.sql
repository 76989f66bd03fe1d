-- A refresh under way, claimed by the instance that asks the provider,
-- committed on its own before it asks. The row lock alone ends with its
-- transaction: when that transaction is lost after the provider answered
-- (Postgres restarted, the connection broke), the instance keeps trying
-- to write the new tokens, and without the claim another instance would
-- find the old ones and spend the refresh token the provider has just
-- rotated (a rotating provider then revokes the whole grant). A claim
-- holds until `claimed_until`, or until its instance releases it. Only
-- added: older releases run on this schema as before.
CREATE TABLE refresh_claims (
    connection_id uuid PRIMARY KEY REFERENCES connections (id) ON DELETE CASCADE,
    claim_id      uuid NOT NULL,
    claimed_until timestamptz NOT NULL
);
