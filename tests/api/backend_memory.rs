//! Every connection the service opens, pooled or per-thread, sets its
//! backend up to keep freed memory (`db::backend_memory`) before it runs
//! anything else. What that saves shows only under load on tables read by
//! index (the data-scale benchmark, S6, in `bench/NOTES.md`): which
//! backends trim their heap after every statement depends on their
//! allocation history, so no test of this size reproduces it on demand.

use mcp_connect::db::{self, hot::HotConnections};
use sqlx::postgres::PgConnectOptions;

use crate::helpers::{TestApp, spawn_app};

/// The last statement of the backend whose connection is named `name`,
/// as Postgres reports it to another connection.
async fn last_statement(app: &TestApp, name: &str) -> String {
    sqlx::query_scalar(
        "SELECT query FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()",
    )
    .bind(name)
    .fetch_one(&app.db)
    .await
    .unwrap()
}

fn named(app: &TestApp, name: &str) -> PgConnectOptions {
    (*app.db.connect_options()).clone().application_name(name)
}

#[tokio::test]
async fn a_pooled_connection_sets_its_backend_up_before_its_first_statement() {
    let app = spawn_app().await;
    let pool = db::pool(named(&app, "pooled-connection"), 1);
    let _conn = pool.acquire().await.unwrap();
    let last = last_statement(&app, "pooled-connection").await;
    assert!(
        last.contains("repeat('x', 1048576)"),
        "last statement: {last}"
    );
}

#[tokio::test]
async fn a_per_thread_connection_sets_its_backend_up_before_its_first_statement() {
    let app = spawn_app().await;
    let hot = HotConnections::new(named(&app, "per-thread-connection"), 1, app.db.clone());
    let conn = hot.acquire().await.unwrap();
    let last = last_statement(&app, "per-thread-connection").await;
    conn.finish(&Ok::<(), sqlx::Error>(()));
    assert!(
        last.contains("repeat('x', 1048576)"),
        "last statement: {last}"
    );
    assert_eq!(
        hot.open(),
        1,
        "the connection is one of the per-thread ones"
    );
}
