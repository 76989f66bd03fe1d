-- The sweeper deletes audit rows past the retention, oldest first, in
-- batches: each batch finds its rows by time.
CREATE INDEX audit_events_at ON audit_events (at);
