-- Dev mode only: the keys `mcp-connect dev` generates on first start, kept so
-- that restarts keep issued tokens valid. Production keys come from
-- configuration and never touch this table.
CREATE TABLE dev_secrets (
    name        text PRIMARY KEY,
    value       text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
