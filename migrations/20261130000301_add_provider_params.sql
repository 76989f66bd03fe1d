-- Per-connection provider parameters (a Zendesk subdomain, a Microsoft
-- tenant, a Salesforce instance_url): asked on the connect page and kept
-- with the ticket and the upstream flow until the connection exists, or
-- learned after consent. Plain values, each checked against its catalog
-- entry's pattern before use; never a secret.
ALTER TABLE connect_tickets ADD COLUMN params jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE oauth_flows ADD COLUMN params jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE connections ADD COLUMN params jsonb NOT NULL DEFAULT '{}'::jsonb;
