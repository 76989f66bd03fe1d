-- Tokens still to be revoked at their provider: a disconnected
-- connection's (the row deleted, its grant perhaps still live there) or
-- those a connect was issued and did not store. Written in the transaction
-- that deletes the connection, so that a provider down for hours, or an
-- instance that dies right after the commit, leaves a revocation someone
-- tries again rather than a grant nobody remembers. `id` is the deleted
-- connection's id (a new one for tokens never stored): the tokens are
-- sealed exactly as the connection row sealed them, bound to that id, the
-- user, the provider and the kind, so they are copied verbatim, never
-- opened to move. A row is due at next_attempt_at; an instance trying it
-- first moves next_attempt_at past the attempt, so another leaves it. It
-- goes when the provider has ended the grant, or when retrying is given up
-- (`revocation.retry_hours` after created_at, the provider gone from the
-- configuration, a key gone from the ring), with an audit row either way.
-- last_error never holds a credential. Only added: older releases run on
-- this schema as before (they revoke once, and know nothing of this table).
CREATE TABLE pending_revocations (
    id                      uuid PRIMARY KEY,
    issuer                  text NOT NULL,
    subject                 text NOT NULL,
    provider                text NOT NULL,
    -- Null: the account was never read (the connect failed before).
    account_id              text,
    origin                  text NOT NULL CHECK (origin IN ('disconnected', 'not_stored')),
    params                  jsonb NOT NULL DEFAULT '{}'::jsonb,
    access_token            bytea NOT NULL CHECK (octet_length(access_token) > 0),
    refresh_token           bytea,
    key_id                  text NOT NULL,
    access_token_expires_at timestamptz,
    created_at              timestamptz NOT NULL DEFAULT now(),
    attempts                integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at         timestamptz NOT NULL DEFAULT now(),
    last_error              text CHECK (char_length(last_error) <= 200)
);

-- What each instance's sweeper polls: revocations by when they are due.
CREATE INDEX pending_revocations_due ON pending_revocations (next_attempt_at);
