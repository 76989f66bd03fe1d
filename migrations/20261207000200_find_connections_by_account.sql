-- Every connection of one account at a provider, whoever made it. At a
-- provider whose revocation may end the whole grant (Google's: one grant
-- per account and client), two people here who connected the same account
-- (a shared mailbox) hold tokens of one grant: revoking the tokens of one
-- person's disconnect would end the other's connection. A revocation owed
-- looks here first. (Not CONCURRENTLY: see 20261205000100. Building it
-- holds writes to `connections` for as long as it takes, seconds for a
-- million rows; reads go on.)
CREATE INDEX connections_by_account ON connections (provider, account_id);
