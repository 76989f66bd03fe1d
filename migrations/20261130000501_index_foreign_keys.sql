-- Deleting a ticket or a web session (the sweeper, sign-out) looks up the
-- rows that refer to it; without these indexes each delete read the whole
-- referring table.
CREATE INDEX web_sessions_pending_ticket ON web_sessions (pending_ticket_id) WHERE pending_ticket_id IS NOT NULL;
CREATE INDEX oauth_flows_ticket ON oauth_flows (ticket_id) WHERE ticket_id IS NOT NULL;
CREATE INDEX oauth_flows_session ON oauth_flows (session_id) WHERE session_id IS NOT NULL;
