-- connect_tickets.connection_id (approval tickets) references connections
-- ON DELETE CASCADE: without an index, every disconnect scans the whole
-- ticket table to find the approvals to drop (found by the benchmark
-- harness's plan check).
CREATE INDEX connect_tickets_connection ON connect_tickets (connection_id) WHERE connection_id IS NOT NULL;
