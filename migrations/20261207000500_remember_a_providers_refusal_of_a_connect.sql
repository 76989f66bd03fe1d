-- The provider's `error` code when it refused the authorization a connect
-- ticket's flow sent the person to give (`invalid_scope`,
-- `unauthorized_client`, `server_error`…; not `access_denied`, which is
-- the person's own decline: `declined_at`). The MCP client's retry then
-- says why, once, instead of handing out another link that would fail the
-- same way. At most 40 printable characters, as the callback cuts it.
-- Adds a column only (no rewrite); releases before it neither set nor
-- read it, and their retries hand out a new link as before.
ALTER TABLE connect_tickets ADD COLUMN refused_with text;
