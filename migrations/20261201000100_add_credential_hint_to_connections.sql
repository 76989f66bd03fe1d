-- The last four characters of an API key or Basic password after an
-- ellipsis ("…a1b2"): all a page ever shows of such a credential, so the
-- user can tell keys apart. NULL for OAuth connections.
ALTER TABLE connections ADD COLUMN credential_hint text
    CHECK (char_length(credential_hint) <= 8);
