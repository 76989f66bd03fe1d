-- A user's connected third-party accounts. Tokens are AES-256-GCM sealed with
-- the key ring (purpose `token`), bound to this row's id, user and provider.
CREATE TABLE connections (
    id                      uuid PRIMARY KEY,
    issuer                  text NOT NULL,
    subject                 text NOT NULL,
    provider                text NOT NULL,
    account_id              text NOT NULL,
    account_label           text NOT NULL,
    scopes                  text[] NOT NULL DEFAULT '{}',
    access_token            bytea NOT NULL,
    refresh_token           bytea,
    key_id                  text NOT NULL,
    access_token_expires_at timestamptz,
    status                  text NOT NULL DEFAULT 'active'
                            CHECK (status IN ('active', 'needs_reauth', 'revoked')),
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    last_used_at            timestamptz,
    UNIQUE (issuer, subject, provider)
);
