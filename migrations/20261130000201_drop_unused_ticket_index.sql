-- Tickets are only ever looked up by id or by hash; the index on
-- (issuer, subject, provider) served no query and cost a B-tree insert on
-- every first ask.
DROP INDEX IF EXISTS connect_tickets_principal;
