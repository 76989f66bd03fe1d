//! `audit.retention_days`: the sweeper and `purge` delete audit rows older
//! than the retention, in bounded batches, and nothing younger.

use crate::helpers::{TestApp, spawn_app_with};

async fn retention_app(days: i64) -> TestApp {
    spawn_app_with(|t| {
        let mut audit = toml::Table::new();
        audit.insert("retention_days".into(), days.into());
        t.insert("audit".into(), toml::Value::Table(audit));
    })
    .await
}

/// `old` rows `old_days` ago and `young` rows a day ago.
async fn fill(app: &TestApp, old: i64, old_days: i64, young: i64) {
    sqlx::query(
        "INSERT INTO audit_events (at, kind, detail)
         SELECT now() - make_interval(days => $2), 'ticket_issued', '{}'::jsonb FROM generate_series(1, $1)",
    )
    .bind(old)
    .bind(old_days as i32)
    .execute(&app.db)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO audit_events (at, kind, detail)
         SELECT now() - interval '1 day', 'connected', '{}'::jsonb FROM generate_series(1, $1)",
    )
    .bind(young)
    .execute(&app.db)
    .await
    .unwrap();
}

async fn counts(app: &TestApp) -> (i64, i64) {
    sqlx::query_as(
        "SELECT count(*) FILTER (WHERE kind = 'ticket_issued'), count(*) FILTER (WHERE kind = 'connected') FROM audit_events",
    )
    .fetch_one(&app.db)
    .await
    .unwrap()
}

#[tokio::test]
async fn the_sweeper_deletes_audit_rows_past_the_retention() {
    let app = retention_app(30).await;
    fill(&app, 2500, 31, 3).await;
    let swept = mcp_connect::sweeper::sweep_once(&app.db, app.state.settings.audit.retention())
        .await
        .unwrap();
    assert!(swept.is_some_and(|n| n >= 2500), "{swept:?}");
    assert_eq!(counts(&app).await, (0, 3));
}

/// `mcp-connect purge <args>` on `app`'s database, which must succeed; what
/// it printed.
async fn purge(app: &TestApp, args: &[&str]) -> String {
    let key = mcp_connect::dev::dev_key_entry(&app.db).await.unwrap();
    let output = app
        .operator_command(&key)
        .arg("purge")
        .args(args)
        .env("MCP_CONNECT_AUDIT__RETENTION_DAYS", "30")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn purge_deletes_audit_rows_past_the_retention() {
    let app = retention_app(30).await;
    fill(&app, 1200, 45, 2).await;
    let stdout = purge(&app, &[]).await;
    assert_eq!(counts(&app).await, (0, 2));
    assert!(stdout.contains("deleted 1200 "), "{stdout}");
    assert!(!stdout.contains("may be left"), "{stdout}");
}

/// A paced purge stops at its share and says what is left to do.
#[tokio::test]
async fn a_paced_purge_says_when_its_share_left_rows_behind() {
    let app = retention_app(30).await;
    fill(&app, 250_321, 45, 2).await;
    let stdout = purge(&app, &[]).await;
    assert_eq!(counts(&app).await, (321, 2));
    assert!(stdout.contains("deleted 250000 "), "{stdout}");
    assert!(
        stdout.contains("may be left") && stdout.contains("--no-pause"),
        "{stdout}"
    );
}

/// A sweep deletes at most 250,000 audit rows (the rest wait for the next
/// one); `--no-pause` takes the whole backlog in one run.
#[tokio::test]
async fn purge_without_pauses_takes_a_backlog_beyond_one_sweeps_share() {
    let app = retention_app(30).await;
    fill(&app, 250_321, 45, 2).await;
    let stdout = purge(&app, &["--no-pause"]).await;
    assert_eq!(counts(&app).await, (0, 2));
    assert!(stdout.contains("deleted 250321 "), "{stdout}");
    assert!(!stdout.contains("may be left"), "{stdout}");
}

/// While another instance sweeps, `purge` deletes nothing and says so
/// with a failing exit status: a script must not take it for done.
#[tokio::test]
async fn purge_fails_while_another_instance_sweeps() {
    let app = retention_app(30).await;
    fill(&app, 10, 45, 0).await;
    let options = mcp_connect::db::connect_options(
        &format!("{}/{}", crate::helpers::server_url(), app.db_name).into(),
    )
    .unwrap();
    let held = mcp_connect::sweeper::hold_off(options).await.unwrap();
    let key = mcp_connect::dev::dev_key_entry(&app.db).await.unwrap();
    let output = app
        .operator_command(&key)
        .arg("purge")
        .env("MCP_CONNECT_AUDIT__RETENTION_DAYS", "30")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("another instance is sweeping"), "{stderr}");
    assert_eq!(counts(&app).await, (10, 0), "nothing deleted");
    held.release().await.unwrap();
    let stdout = purge(&app, &[]).await;
    assert!(stdout.contains("deleted 10 "), "{stdout}");
}

#[tokio::test]
async fn the_default_retention_is_ninety_days() {
    let app = spawn_app_with(|_| {}).await;
    fill(&app, 5, 91, 0).await;
    fill(&app, 0, 0, 0).await;
    sqlx::query(
        "INSERT INTO audit_events (at, kind) VALUES (now() - interval '89 days', 'connected')",
    )
    .execute(&app.db)
    .await
    .unwrap();
    mcp_connect::sweeper::sweep_once(&app.db, app.state.settings.audit.retention())
        .await
        .unwrap();
    assert_eq!(counts(&app).await, (0, 1));
}
