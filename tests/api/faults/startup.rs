//! Start-up while Postgres is away: retried with backoff for
//! `database.startup_timeout`, each attempt logged.

use std::time::{Duration, Instant};

use mcp_connect::startup::Application;

use super::OwnPostgres;
use crate::helpers::{prepare, started};

fn with_startup_timeout(secs: i64) -> impl FnOnce(&mut toml::Table) {
    move |t| {
        let mut database = toml::Table::new();
        database.insert("startup_timeout_secs".into(), secs.into());
        t.insert("database".into(), toml::Value::Table(database));
    }
}

#[tokio::test]
async fn start_up_waits_for_a_database_that_comes_back() {
    let pg = OwnPostgres::start(&[]);
    let db_name = format!("mcp_connect_test_{}", uuid::Uuid::new_v4().simple());
    let p = prepare(&pg.url(), &db_name, None, with_startup_timeout(60)).await;
    p.pool.close().await;
    pg.down();
    let (settings, listener, dev) = (p.settings, p.listener, Some(p.dev.routes()));
    let building = tokio::spawn(Application::build_with_listener(settings, listener, dev));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!building.is_finished(), "start-up gave up at once");
    pg.up();
    let app = tokio::time::timeout(Duration::from_secs(30), building)
        .await
        .expect("started once the database was back")
        .unwrap()
        .expect("built");
    let app = started(app, p.dev, p.pool, p.base, p.port, db_name, &pg.url(), true);
    let ready = app
        .http
        .get(format!("{}/readyz", app.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    assert!(
        crate::logs::captured()
            .lines()
            .any(|l| l.contains("database not reachable yet") && l.contains("attempt")),
        "each attempt is logged"
    );
}

#[tokio::test]
async fn start_up_gives_up_after_the_startup_timeout() {
    let pg = OwnPostgres::start(&[]);
    let db_name = format!("mcp_connect_test_{}", uuid::Uuid::new_v4().simple());
    let p = prepare(&pg.url(), &db_name, None, with_startup_timeout(3)).await;
    p.pool.close().await;
    pg.down();
    let started_at = Instant::now();
    let built = Application::build_with_listener(p.settings, p.listener, None).await;
    let took = started_at.elapsed();
    assert!(built.is_err());
    assert!(took >= Duration::from_secs(2), "{took:?}");
    assert!(took < Duration::from_secs(15), "{took:?}");
}
