//! Migrating beside instances that still serve. A migration that alters a
//! table needs that table's strongest lock; while it waits for it (behind a
//! refresh holding a row, a `pg_dump`, any long transaction), every later
//! statement on the table queues behind the waiting migration, so the
//! instances still serving stall with it. Each migration statement
//! therefore waits for a lock at most [`LOCK_WAIT`]; then the attempt gives
//! way (its transaction rolls back, releasing what it held) and is tried
//! again after a pause, for up to a patience the caller gives. While a
//! migration waits, serving statements queue behind it for no longer than
//! one such wait; once it holds its locks, they wait for it to finish, as
//! for any migration.
//!
//! Waiting for another instance's migration (the migrator's own advisory
//! lock, the one every release takes) is not bounded: that one is running,
//! not stalled.

use std::time::{Duration, Instant};

use sqlx::{
    PgConnection,
    migrate::{Migrate, MigrateError, Migrator},
};

/// How long one migration statement waits for a lock before its attempt
/// gives way.
pub const LOCK_WAIT: Duration = Duration::from_secs(2);

/// How long migrating keeps trying when its locks are held elsewhere.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// The longest pause between two attempts.
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// Runs `migrator` (built without locking of its own) on `conn` under the
/// migrator's advisory lock, each statement waiting at most `lock_wait`
/// for a lock, trying again while a lock wait is what failed and
/// `patience` has not run out.
pub async fn run(
    conn: &mut PgConnection,
    migrator: &Migrator,
    lock_wait: Duration,
    patience: Duration,
) -> Result<(), MigrateError> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(250);
    loop {
        match run_once(conn, migrator, lock_wait).await {
            Err(e) if lock_wait_ran_out(&e) && started.elapsed() < patience => {
                tracing::warn!(
                    error = %e,
                    retry_in_ms = pause.as_millis() as u64,
                    "a migration gave way to a lock another session holds (a long transaction, \
                     a pg_dump?) so that the instances serving do not queue behind it; trying again"
                );
                tokio::time::sleep(pause.min(patience.saturating_sub(started.elapsed()))).await;
                pause = (pause * 2).min(MAX_PAUSE);
            }
            done => return done,
        }
    }
}

async fn run_once(
    conn: &mut PgConnection,
    migrator: &Migrator,
    lock_wait: Duration,
) -> Result<(), MigrateError> {
    // Another instance's migration is waited for, however long it runs.
    sqlx::query("SET lock_timeout = 0")
        .execute(&mut *conn)
        .await?;
    conn.lock().await?;
    let ran = async {
        sqlx::query("SELECT set_config('lock_timeout', $1, false)")
            .bind(format!("{}ms", lock_wait.as_millis()))
            .execute(&mut *conn)
            .await?;
        // `run_direct`, not `run`: `run` takes `impl Acquire`, whose future
        // is not `Send` for a borrowed connection (sqlx's own workaround).
        migrator.run_direct(None, &mut *conn, false).await
    }
    .await;
    // Released whatever happened, or the next attempt (or another
    // instance) would wait for this connection's own lock.
    let unlocked = conn.unlock().await;
    let reset = sqlx::query("RESET lock_timeout").execute(&mut *conn).await;
    ran?;
    unlocked?;
    reset?;
    Ok(())
}

/// Whether a migration failed waiting for a lock (`lock_timeout`).
fn lock_wait_ran_out(e: &MigrateError) -> bool {
    let source = match e {
        MigrateError::Execute(e) | MigrateError::ExecuteMigration(e, _) => e,
        _ => return false,
    };
    matches!(source, sqlx::Error::Database(d) if d.code().as_deref() == Some("55P03"))
}
