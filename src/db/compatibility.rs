//! Running on a schema that a newer release migrated further: applied
//! migrations this release does not embed are tolerated (a rolling
//! upgrade's old instances keep serving and restarting; a rollback starts
//! the older release again), with a warning naming them — unless the
//! schema says this release is too old for it
//! (`schema_compatibility.oldest_migration`, raised by a migration that
//! removes or changes what older releases use). See the migration
//! `20261206000200` for the rule.

use sqlx::{PgPool, migrate::Migrator};

use super::{DbSetupError, MIGRATOR};

/// The embedded migrations, tolerating applied ones this release lacks,
/// to run under [`super::migration_locks::run`] (which takes the
/// migrator's lock itself).
pub(super) fn tolerant_migrator() -> Migrator {
    let mut migrator = Migrator::with_migrations(MIGRATOR.iter().cloned().collect());
    migrator.set_ignore_missing(true).set_locking(false);
    migrator
}

/// The newest migration this release embeds.
pub fn newest_embedded() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}

/// Before migrating: refuses a database holding a migration this release
/// lacks although it embeds later ones (a migration file renamed or
/// removed, which the migrator refused before it tolerated newer ones:
/// a renamed one would be applied a second time).
pub(super) async fn check_before(pool: &PgPool) -> Result<(), DbSetupError> {
    let newest = newest_embedded();
    let gap = applied(pool)
        .await?
        .into_iter()
        .find(|v| *v < newest && !MIGRATOR.version_exists(*v));
    match gap {
        Some(version) => Err(DbSetupError::UnknownMigration { version }),
        None => Ok(()),
    }
}

/// After migrating: refuses a schema this release is too old for, and
/// warns about migrations from newer releases.
pub(super) async fn check_after(pool: &PgPool) -> Result<(), DbSetupError> {
    let oldest = sqlx::query_scalar!("SELECT oldest_migration FROM schema_compatibility")
        .fetch_one(pool)
        .await
        .map_err(DbSetupError::Compatibility)?;
    let newest = newest_embedded();
    if !MIGRATOR.version_exists(oldest) {
        return Err(DbSetupError::TooOld {
            needs: oldest,
            newest,
        });
    }
    let newer: Vec<i64> = applied(pool)
        .await?
        .into_iter()
        .filter(|v| *v > newest)
        .collect();
    if let Some(last) = newer.last() {
        tracing::warn!(
            newer = newer.len(),
            newest_applied = last,
            newest_here = newest,
            "the database was migrated by a newer release; this one runs on it, as the schema allows \
             (what newer releases added is left alone)"
        );
    }
    Ok(())
}

/// The versions in the migrator's own table, oldest first; none before
/// the first migration. (Not in `migrations/`, so not checkable when the
/// crate is compiled.)
async fn applied(pool: &PgPool) -> Result<Vec<i64>, DbSetupError> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(pool)
        .await
        .map_err(DbSetupError::Compatibility)?;
    if !exists {
        return Ok(Vec::new());
    }
    sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY version")
        .fetch_all(pool)
        .await
        .map_err(DbSetupError::Compatibility)
}
