-- Upstream OAuth authorizations in progress. `state` is stored hashed and the
-- PKCE verifier encrypted; both are bound to the browser session and ticket.
-- `login` flows (signing in to this service) have no ticket and no provider.
CREATE TABLE oauth_flows (
    id                  uuid PRIMARY KEY,
    state_hash          bytea NOT NULL UNIQUE,
    kind                text NOT NULL CHECK (kind IN ('login', 'connect')),
    ticket_id           uuid REFERENCES connect_tickets (id) ON DELETE CASCADE,
    session_id          uuid REFERENCES web_sessions (id) ON DELETE CASCADE,
    -- for login flows: hash of the pre-login cookie that started the flow
    browser_binding     bytea,
    provider            text,
    pkce_verifier       bytea NOT NULL,
    nonce               text,
    key_id              text NOT NULL,
    return_to           text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    expires_at          timestamptz NOT NULL,
    completed_at        timestamptz
);
CREATE INDEX oauth_flows_expires_at ON oauth_flows (expires_at);
