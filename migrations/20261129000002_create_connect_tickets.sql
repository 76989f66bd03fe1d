-- One-time tickets behind the /connect URLs handed out in URL elicitations.
-- Stored as SHA-256 only; redeemed at most once by an atomic UPDATE.
CREATE TABLE connect_tickets (
    id               uuid PRIMARY KEY,
    ticket_hash      bytea NOT NULL UNIQUE,
    issuer           text NOT NULL,
    subject          text NOT NULL,
    client_id        text NOT NULL,
    provider         text NOT NULL,
    scopes           text[] NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz NOT NULL,
    redeemed_at      timestamptz,
    declined_at      timestamptz
);
CREATE INDEX connect_tickets_principal ON connect_tickets (issuer, subject, provider);
CREATE INDEX connect_tickets_expires_at ON connect_tickets (expires_at);
