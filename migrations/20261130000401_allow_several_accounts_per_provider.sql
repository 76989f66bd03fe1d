-- A user may connect several accounts of one provider (work and personal):
-- one row per account. The label starts as the provider's account name;
-- once the user renames it, later connects and refreshes keep their name.
ALTER TABLE connections DROP CONSTRAINT connections_issuer_subject_provider_key;
ALTER TABLE connections
    ADD CONSTRAINT connections_issuer_subject_provider_account_key
        UNIQUE (issuer, subject, provider, account_id);
ALTER TABLE connections ADD COLUMN label_edited boolean NOT NULL DEFAULT false;

-- A connect ticket from `connect {another_account: true}`: the provider is
-- asked to show its account chooser, and the retry completes with the
-- account connected through it.
ALTER TABLE connect_tickets ADD COLUMN add_account boolean NOT NULL DEFAULT false;
