-- S6 data scale: the rows a large deployment holds, generated inside
-- Postgres (INSERT … SELECT over generate_series: no round trip per row),
-- on the tables the service's own migrations made. Nothing the service owns
-- is dropped, altered or recreated; every INSERT names the columns it fills
-- and leaves the others (and any column added later) to their defaults, so
-- a migration that adds a column with a default or a nullable one needs no
-- change here. A new NOT NULL column without a default, or a new table
-- that should hold data at scale, needs a line here.
--
-- psql variables (set by the harness with -v):
--   users      users with connections (full scale 200000)
--   audit      audit rows (full scale 10000000)
--   retention  the service's audit retention in days: the audit rows
--              span the retention less a day, ending now, so that none is
--              past it (a running deployment's sweeper keeps the table so,
--              and rows past it would be deleted by the service under
--              measurement); the 'old_audit' rows are the 30 days before it
--   old_audit  how many audit rows past retention (part 'old_audit')
--   issuer     the issuer of the seeded users (the dev identity provider's)
--   part       which rows: 'connections', 'audit', 'tickets', 'sessions',
--              'analyze' (after the others: VACUUM and ANALYZE), 'backlog'
--              (expired tickets for the sweeper to delete), 'old_audit'
--              (audit rows past retention, for the sweeper too)
--   lo, hi     the range of the part's generate_series, so that the
--              harness can run a part in pieces on several connections
--
-- Sealed token columns hold pseudo-random bytes of a sealed token's size:
-- no scenario opens a seeded user's connection. Rows are generated in the
-- order of their main indexes' keys (users in order, audit time rising),
-- so the B-trees are built by appending rather than by random inserts
-- into indexes larger than shared_buffers: the sizes are those of real
-- data, the insertion order is a shortcut.

\set ON_ERROR_STOP on

SELECT :'part' = 'connections' AS seed_connections, :'part' = 'audit' AS seed_audit,
       :'part' = 'tickets' AS seed_tickets, :'part' = 'sessions' AS seed_sessions,
       :'part' = 'analyze' AS seed_analyze, :'part' = 'backlog' AS seed_backlog,
       :'part' = 'old_audit' AS seed_old_audit \gset

\if :seed_connections

-- 5 providers per user, each connection granted to the client that asked
-- for it (a connect always records the asking client's grant).
WITH connected AS (
INSERT INTO connections (id, issuer, subject, provider, account_id, account_label,
                         scopes, access_token, refresh_token, key_id,
                         access_token_expires_at, status, last_used_at)
SELECT gen_random_uuid(), :'issuer', 'seed-' || u, p.name,
       'acct-' || u || '-' || p.name, 'seed-' || u || '@' || p.name,
       ARRAY['read', 'profile'],
       -- nonce (12) + a 40-byte token + tag (16) ≈ a sealed access token
       sha256(int8send(u * 8 + p.n)) || sha256(int8send(-u * 8 - p.n)) || substr(sha256(int8send(u)), 1, 4),
       sha256(int8send(u * 8 + p.n + 4)) || sha256(int8send(-u * 8 - p.n - 4)) || substr(sha256(int8send(-u)), 1, 4),
       'seed-key', now() + interval '1 hour', 'active',
       now() - (u % 1440) * interval '1 minute'
FROM generate_series(:lo, :hi) AS u,
     (VALUES (1, 'demo'), (2, 'github'), (3, 'google'), (4, 'notion'), (5, 'slack')) AS p (n, name)
RETURNING id, last_used_at
)
INSERT INTO client_grants (connection_id, client_id, last_used_at)
SELECT id, 'seed-client', last_used_at FROM connected;
\endif

\if :seed_audit
-- Audit rows over the retention window, about 10 kinds, each user's rows
-- together (the principal index) and time rising (the kind index).
INSERT INTO audit_events (at, issuer, subject, kind, provider, detail, ip, user_agent)
SELECT now() - (:retention - 1) * interval '1 day' + g * ((:retention - 1) * interval '1 day' / :audit),
       :'issuer', 'seed-' || (1 + (g::bigint * :users / :audit)),
       (ARRAY['ticket_issued', 'consent_given', 'connected', 'refreshed', 'refreshed',
              'refreshed', 'ticket_issued', 'disconnected', 'refresh_failed', 'consent_cancelled'])[1 + g % 10],
       (ARRAY['demo', 'github', 'google', 'notion', 'slack'])[1 + (g / 10) % 5],
       -- one value of a ticket's detail's size: building a distinct one
       -- per row doubles the seed time, and nothing indexes it
       '{"ticket_id": "8d0e3a2c-27f4-4c43-9d51-6a1d9b2e7f10", "client_id": "seed-client", "scopes": ["read", "profile"]}',
       '10.' || (g % 250) || '.' || (g / 250 % 250) || '.7',
       'Mozilla/5.0 (X11; Linux x86_64) seed'
FROM generate_series(:lo, :hi) AS g;
\endif

\if :seed_tickets
-- Live tickets: unredeemed, expiring within the hour.
INSERT INTO connect_tickets (id, ticket_hash, issuer, subject, client_id, provider, scopes, expires_at)
SELECT gen_random_uuid(), sha256(int8send(g) || '\x01'::bytea), :'issuer',
       'seed-' || (1 + g % :users), 'seed-client', 'github', ARRAY['read'],
       now() + interval '10 minutes' + (g % 3000) * interval '1 second'
FROM generate_series(:lo, :hi) AS g;
\endif

\if :seed_sessions
-- Signed-in browsers: a week-long session each.
INSERT INTO web_sessions (id, id_hash, issuer, subject, display_name, csrf_secret, expires_at)
SELECT gen_random_uuid(), sha256(int8send(g) || '\x02'::bytea), :'issuer',
       'seed-' || (1 + g % :users), 'Seed user ' || g, sha256(int8send(-g)),
       now() + interval '7 days' - (g % 10080) * interval '1 minute'
FROM generate_series(:lo, :hi) AS g;
\endif

\if :seed_analyze
-- Vacuumed as well as analyzed, as autovacuum leaves a deployment's tables
-- soon after a bulk load (and this machine's Postgres may run without
-- it). Left unvacuumed, a heap filled by concurrent INSERTs keeps the
-- free-space map that their bulk extensions wrote: pages recorded as empty
-- that have long been filled. Each new row then chases those entries into
-- old pages — a read from disk and a full-page image in the WAL per insert
-- — and S2's ask ran at 0.78× of the empty database's for that alone.
VACUUM (ANALYZE) connections, client_grants, audit_events, connect_tickets, web_sessions;

\endif

\if :seed_backlog

-- Tickets that expired two hours ago and more: past the sweeper's grace.
INSERT INTO connect_tickets (id, ticket_hash, issuer, subject, client_id, provider, scopes,
                             created_at, expires_at)
SELECT gen_random_uuid(), sha256(int8send(g) || '\x03'::bytea), :'issuer',
       'seed-' || (1 + g % :users), 'seed-client', 'github', ARRAY['read'],
       now() - interval '3 hours', now() - interval '2 hours' - (g % 3600) * interval '1 second'
FROM generate_series(:lo, :hi) AS g;

\endif

\if :seed_old_audit

-- Audit rows of the 30 days before the retention cut: what a retention
-- shortened by a month, or a sweeper that was down, leaves to delete.
INSERT INTO audit_events (at, issuer, subject, kind, provider, detail, ip, user_agent)
SELECT now() - (:retention + 30) * interval '1 day' + g * (interval '29 days' / :old_audit),
       :'issuer', 'seed-' || (1 + g % :users), 'ticket_issued', 'github',
       '{"ticket_id": "8d0e3a2c-27f4-4c43-9d51-6a1d9b2e7f10", "client_id": "seed-client", "scopes": ["read", "profile"]}',
       '10.' || (g % 250) || '.' || (g / 250 % 250) || '.7',
       'Mozilla/5.0 (X11; Linux x86_64) seed'
FROM generate_series(:lo, :hi) AS g;

\endif
