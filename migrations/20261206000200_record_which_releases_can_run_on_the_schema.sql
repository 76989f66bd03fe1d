-- Which releases can run on this schema. A release starts on a schema
-- that newer releases migrated further (new instances of a rolling
-- upgrade migrate while old ones still serve and restart; a rollback
-- starts the older release again) as long as what they added leaves
-- everything it uses in place. A migration that removes or changes what
-- older releases use (the contract step of an expand/contract change)
-- raises `oldest_migration` to its own version: a release that does not
-- embed that migration then refuses to start, naming it. Releases before
-- this migration refuse any newer schema, so it starts here.
CREATE TABLE schema_compatibility (
    only_row         boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    oldest_migration bigint NOT NULL
);
INSERT INTO schema_compatibility (oldest_migration) VALUES (20261206000200);
