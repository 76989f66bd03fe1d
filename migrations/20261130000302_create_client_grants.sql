-- Which MCP clients a user allowed to use each of their connections
-- (per-client consent). A connection is usable by a client only with a row
-- here; the client that started the connect flow gets one with the
-- connection, any other client asks the user once on an approval page.
--
-- Connections that exist when this migration runs get no rows: the next
-- client to use one is asked once. Nothing is granted on anyone's behalf.
CREATE TABLE client_grants (
    connection_id uuid NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
    client_id     text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz,
    PRIMARY KEY (connection_id, client_id)
);

-- A ticket naming a connection asks the user to let the ticket's client
-- use that connection (the approval page); without one it is a connect
-- ticket as before.
ALTER TABLE connect_tickets
    ADD COLUMN connection_id uuid REFERENCES connections (id) ON DELETE CASCADE;
