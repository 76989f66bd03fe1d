-- The connect ticket a browser session is looking at, so that after
-- `/connect?ticket=…` has read the ticket the browser moves on to a URL
-- without it (`/connect/consent`) and the ticket id stays server-side.
ALTER TABLE web_sessions
    ADD COLUMN pending_ticket_id uuid REFERENCES connect_tickets (id) ON DELETE SET NULL;
