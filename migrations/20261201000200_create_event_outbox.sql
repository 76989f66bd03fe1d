-- Connection events for the operator's webhooks: one row per event and
-- endpoint, written in the transaction of the change it reports, so an
-- event exists exactly when its change does. A row is due at
-- next_attempt_at; an instance delivering it moves next_attempt_at to the
-- end of its lease (lease_id names the claim), so a row whose deliverer
-- died becomes due again by itself. Delivered rows are deleted; rows that
-- failed for the whole retry window get failed_at and are kept for
-- inspection until the sweeper removes them. Payloads never hold a
-- credential.
CREATE TABLE event_outbox (
    event_id        uuid NOT NULL,
    endpoint        text NOT NULL,
    event_type      text NOT NULL,
    payload         jsonb NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    attempts        integer NOT NULL DEFAULT 0,
    lease_id        uuid,
    last_error      text,
    failed_at       timestamptz,
    PRIMARY KEY (event_id, endpoint)
);

-- What the deliverers poll: rows still to deliver, by when they are due.
CREATE INDEX event_outbox_due ON event_outbox (next_attempt_at) WHERE failed_at IS NULL;
-- What the sweeper removes: failed rows past their retention.
CREATE INDEX event_outbox_failed ON event_outbox (failed_at) WHERE failed_at IS NOT NULL;
