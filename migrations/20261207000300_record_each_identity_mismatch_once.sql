-- A connect link opened by a session of another person is recorded once
-- per link and session. The session's pending link alone could not say
-- so: opening the foreign link and one's own in turn changes it every
-- time, and each change wrote another `identity_mismatch` audit row (a
-- way to fill the audit table, under the link owner's name). Rows go
-- with their link or session.
CREATE TABLE identity_mismatches (
    ticket_id  uuid NOT NULL REFERENCES connect_tickets (id) ON DELETE CASCADE,
    session_id uuid NOT NULL REFERENCES web_sessions (id) ON DELETE CASCADE,
    PRIMARY KEY (ticket_id, session_id)
);
CREATE INDEX identity_mismatches_session ON identity_mismatches (session_id);
