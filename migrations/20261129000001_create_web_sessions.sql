-- Browser sessions for the web pages. The cookie carries a random id; only
-- its SHA-256 is stored, so a database read does not yield a usable cookie.
CREATE TABLE web_sessions (
    id            uuid PRIMARY KEY,
    id_hash       bytea NOT NULL UNIQUE,
    issuer        text NOT NULL,
    subject       text NOT NULL,
    display_name  text,
    csrf_secret   bytea NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX web_sessions_expires_at ON web_sessions (expires_at);
