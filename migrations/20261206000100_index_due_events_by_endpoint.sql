-- Each endpoint's deliverer claims its own due rows, oldest due first. On
-- `event_outbox_due` alone (by due time) that claim walked past every due
-- row of every other endpoint to find its own: a removed endpoint's
-- backlog, or a slow one's, made every other deliverer's poll, on every
-- instance, as long as that backlog. By endpoint, then due time, the claim
-- reads its own rows only and stops at its batch. (Not CONCURRENTLY: see
-- 20261205000100; the table holds only what is still to be delivered.)
CREATE INDEX event_outbox_due_by_endpoint
    ON event_outbox (endpoint, next_attempt_at) WHERE failed_at IS NULL;
