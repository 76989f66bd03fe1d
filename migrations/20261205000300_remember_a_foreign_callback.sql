-- When a provider callback for this flow first came from another browser
-- session than the one that started it. Such a callback leaves the flow
-- alone (holding someone's `state` must not cancel their connect) and is
-- audited once per flow: reloading it must not write a row each time.
-- Nullable, no default: no rewrite of the table.
ALTER TABLE oauth_flows ADD COLUMN foreign_callback_at timestamptz;
