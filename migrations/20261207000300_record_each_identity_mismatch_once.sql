-- A connect link opened by a session of another person is recorded once
-- per link and session. The session's pending link alone could not say
-- so: opening the foreign link and one's own in turn changes it every
-- time, and each change wrote another `identity_mismatch` audit row (a
-- way to fill the audit table, under the link owner's name). The link
-- keeps the sessions it was refused to (NULL until one: nothing stored
-- for the rest), and goes with them: no table of its own, whose cascade
-- every ticket the sweeper deletes would run.
ALTER TABLE connect_tickets ADD COLUMN mismatched_sessions uuid[];
