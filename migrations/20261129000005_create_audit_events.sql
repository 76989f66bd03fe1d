-- What happened to whose connections, for operators and users. Never a
-- secret in `detail`.
CREATE TABLE audit_events (
    id          bigserial PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    issuer      text,
    subject     text,
    kind        text NOT NULL,
    provider    text,
    detail      jsonb NOT NULL DEFAULT '{}'::jsonb,
    ip          text,
    user_agent  text
);
CREATE INDEX audit_events_principal ON audit_events (issuer, subject, at DESC);
CREATE INDEX audit_events_kind ON audit_events (kind, at DESC);
