//! What a stopping server leaves to the requests still draining and to
//! the work that runs on after its workers have stopped (a refresh, a
//! connect's exchange, a disconnect): connections that work.

use std::time::Duration;

use crate::helpers::spawn_app_with;

/// The pooled connections a worker opened are registered with its runtime
/// and die with it; workers stop one by one as the server stops. Once one
/// has stopped, the pool hands out no connection opened before, so
/// requests still draining and the work that runs on after them get live
/// ones rather than failing on a dead one.
#[tokio::test]
async fn once_a_worker_stops_the_pool_hands_out_no_connection_opened_before() {
    // Two pooled connections, two kept per thread.
    let app = spawn_app_with(|t| {
        t.insert("database_max_connections".into(), 4.into());
    })
    .await;
    let pool = app.state.db.clone();
    // None open yet: the worker below opens them all.
    while let Some(idle) = pool.try_acquire() {
        drop(idle.detach());
    }
    // A worker: a runtime of its own opens every pooled connection, gives
    // them back, and stops.
    let worker = tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let held = futures::future::join_all([pool.acquire(), pool.acquire()]).await;
            let mut backends = Vec::new();
            for conn in held {
                let mut conn = conn.unwrap();
                backends.push(backend(&mut conn).await);
            }
            // Given back in tasks of this runtime.
            for _ in 0..250 {
                if pool.num_idle() == 2 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            assert_eq!(pool.num_idle(), 2);
            backends
        })
    });
    let worker_opened = worker.await.unwrap();

    app.stop_at_once().await;
    // Both pooled connections at once: neither is one the worker opened
    // (on which a statement would fail, or pass by chance on what the
    // socket last held) — once the server's own workers have stopped,
    // which a stop "at once" does not wait for.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let acquired = futures::future::join_all([app.state.db.acquire(), app.state.db.acquire()]);
        let acquired = tokio::time::timeout(Duration::from_secs(5), acquired).await;
        // A statement on one the worker opened fails (its runtime is gone)
        // or names a backend the worker had.
        let mut backends = Vec::new();
        for conn in acquired.expect("acquired in time") {
            backends.push(
                sqlx::query_scalar::<_, i32>("SELECT pg_backend_pid()")
                    .fetch_one(&mut *conn.unwrap())
                    .await
                    .ok(),
            );
        }
        if backends
            .iter()
            .all(|b| b.is_some_and(|b| !worker_opened.contains(&b)))
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{backends:?} in {worker_opened:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The Postgres backend serving `conn`.
async fn backend(conn: &mut sqlx::PgConnection) -> i32 {
    sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(conn)
        .await
        .unwrap()
}
