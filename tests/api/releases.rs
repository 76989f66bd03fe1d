//! A release on a schema that a newer one migrated further, as in a
//! rolling upgrade (old instances restarting after new ones migrated) or a
//! rollback: it starts and serves, and the log says so — unless the schema
//! says it is too old for it (a newer release removed or changed what it
//! uses), and then it refuses to start and names the release it needs.

use mcp_connect::db::{self, ANSWER_WITHIN, compatibility::newest_embedded};

use crate::helpers::{TestApp, spawn_app};

/// What a newer release's migration leaves: its change to the schema and
/// its row in the migrator's table, as that release's migrator writes it.
async fn migrated_by_a_newer_release(app: &TestApp, version: i64) {
    sqlx::query("CREATE TABLE IF NOT EXISTS added_by_a_newer_release (id int)")
        .execute(&app.db)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES ($1, 'added by a newer release', true, '\\x00', 1)",
    )
    .bind(version)
    .execute(&app.db)
    .await
    .unwrap();
}

#[tokio::test]
async fn a_release_runs_on_a_schema_a_newer_release_added_to() {
    let app = spawn_app().await;
    let newer = newest_embedded() + 31;
    migrated_by_a_newer_release(&app, newer).await;

    db::migrate(&app.db, ANSWER_WITHIN)
        .await
        .expect("a schema a newer release only added to is run on");
    let logs = crate::logs::captured();
    assert!(
        logs.lines()
            .any(|l| l.contains("migrated by a newer release")
                && l.contains(&format!("newest_applied={newer}"))),
        "the log names the newer migration"
    );
    // A whole instance starts on it and is ready.
    let second = app.second_instance().await;
    let ready = second
        .http
        .get(format!("{}/readyz", second.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
}

#[tokio::test]
async fn a_release_too_old_for_the_schema_refuses_to_start_and_names_what_it_needs() {
    let app = spawn_app().await;
    let contract = newest_embedded() + 47;
    migrated_by_a_newer_release(&app, contract).await;
    sqlx::query("UPDATE schema_compatibility SET oldest_migration = $1")
        .bind(contract)
        .execute(&app.db)
        .await
        .unwrap();

    let refused = db::migrate(&app.db, ANSWER_WITHIN)
        .await
        .expect_err("refused")
        .to_string();
    assert!(
        refused.contains(&format!("embeds migration {contract}"))
            && refused.contains(&format!("this one's newest is {}", newest_embedded())),
        "{refused}"
    );
    // As an operator sees it: `migrate` exits 1 with the same sentence.
    let output = app
        .operator_command("k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
        .arg("migrate")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("embeds migration {contract}")),
        "{stderr}"
    );

    // The releases that embed it run again.
    sqlx::query("UPDATE schema_compatibility SET oldest_migration = $1")
        .bind(newest_embedded())
        .execute(&app.db)
        .await
        .unwrap();
    db::migrate(&app.db, ANSWER_WITHIN).await.unwrap();
}

#[tokio::test]
async fn a_migration_missing_among_this_releases_own_is_refused_before_migrating() {
    let app = spawn_app().await;
    // Older than every embedded migration, so none of this release's:
    // what a renamed or removed migration file leaves.
    let renamed = 20261128000000;
    migrated_by_a_newer_release(&app, renamed).await;
    let refused = db::migrate(&app.db, ANSWER_WITHIN)
        .await
        .expect_err("refused")
        .to_string();
    assert!(
        refused.contains(&format!("has migration {renamed}"))
            && refused.contains("renamed or removed"),
        "{refused}"
    );
}

/// A migration whose table a long transaction holds (a refresh's row lock,
/// a `pg_dump`) gives way after each short lock wait instead of queueing
/// every later statement on the table behind it, so the instances still
/// serving do not stall; it tries again while its patience lasts, says it
/// could not when that runs out, and goes through once the lock is free.
#[tokio::test]
async fn a_migration_behind_a_held_lock_gives_way_to_the_statements_queued_behind_it() {
    use sqlx::migrate::{Migration, MigrationType, Migrator};
    use std::time::{Duration, Instant};

    let app = spawn_app().await;
    for statement in [
        "CREATE TABLE held (id int PRIMARY KEY)",
        "INSERT INTO held VALUES (1)",
    ] {
        sqlx::query(statement).execute(&app.db).await.unwrap();
    }
    let mut migrator = Migrator::with_migrations(vec![Migration::new(
        1,
        "alter held".into(),
        MigrationType::Simple,
        sqlx::SqlSafeStr::into_sql_str("ALTER TABLE held ADD COLUMN note text"),
        false,
    )]);
    migrator.dangerous_set_table_name("held_migrations");
    migrator.set_locking(false);
    let migrator = std::sync::Arc::new(migrator);

    // A transaction holds a row of the table, and keeps it.
    let mut holder = app.db.begin().await.unwrap();
    sqlx::query("SELECT id FROM held WHERE id = 1 FOR UPDATE")
        .execute(&mut *holder)
        .await
        .unwrap();
    let migrating = {
        let (pool, migrator) = (app.db.clone(), migrator.clone());
        tokio::spawn(async move {
            let mut conn = pool.acquire().await.unwrap();
            let started = Instant::now();
            let done = db::migration_locks::run(
                &mut conn,
                &migrator,
                Duration::from_millis(300),
                Duration::from_secs(3),
            )
            .await;
            (done, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    // A serving statement on the table: it waits at most one lock wait.
    for _ in 0..3 {
        let read = tokio::time::timeout(
            Duration::from_secs(2),
            sqlx::query_scalar::<_, i64>("SELECT count(*) FROM held").fetch_one(&app.db),
        )
        .await;
        assert_eq!(read.expect("not stalled behind the migration").unwrap(), 1);
    }
    let (done, took) = tokio::time::timeout(Duration::from_secs(10), migrating)
        .await
        .expect("the migration's patience ends")
        .unwrap();
    let error = done.expect_err("the lock was never free").to_string();
    assert!(error.contains("lock timeout"), "{error}");
    assert!(took >= Duration::from_secs(3), "tried again: {took:?}");

    // Once the lock is free, the migration goes through.
    holder.commit().await.unwrap();
    let mut conn = app.db.acquire().await.unwrap();
    db::migration_locks::run(
        &mut conn,
        &migrator,
        Duration::from_millis(300),
        Duration::from_secs(3),
    )
    .await
    .unwrap();
    sqlx::query("SELECT note FROM held")
        .fetch_all(&app.db)
        .await
        .unwrap();
}

/// Every migration is the one released: a database a release migrated
/// remembers each migration's checksum, and a file changed since stops
/// every later release from starting on it. A new migration adds its line
/// to `tests/schema/released_migrations.txt`; no line ever changes.
#[test]
fn no_released_migration_has_changed() {
    use std::fmt::Write as _;
    let released = include_str!("../schema/released_migrations.txt");
    let pinned: std::collections::BTreeMap<i64, &str> = released
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut fields = l.split_whitespace();
            let version = fields.next().and_then(|v| v.parse().ok()).expect(l);
            (version, fields.next().expect(l))
        })
        .collect();
    let mut problems = String::new();
    for migration in db::MIGRATOR.iter() {
        let checksum = migration.checksum.iter().fold(String::new(), |mut hex, b| {
            let _ = write!(hex, "{b:02x}");
            hex
        });
        match pinned.get(&migration.version) {
            Some(&pinned) if pinned == checksum => {}
            Some(_) => {
                let _ = writeln!(
                    problems,
                    "migration {} ({}) was changed after its release: undo the change and make it a new migration",
                    migration.version, migration.description
                );
            }
            None => {
                let _ = writeln!(
                    problems,
                    "migration {} ({}) is not pinned: add `{} {checksum} <file name>` to tests/schema/released_migrations.txt",
                    migration.version, migration.description, migration.version
                );
            }
        }
    }
    for version in pinned.keys() {
        if !db::MIGRATOR.version_exists(*version) {
            let _ = writeln!(
                problems,
                "migration {version} was released and is gone from migrations/: a released migration stays"
            );
        }
    }
    assert!(problems.is_empty(), "{problems}");
}
