//! What a stopping server leaves to the work that runs on after its
//! workers have stopped (a refresh, a connect's exchange, a disconnect):
//! connections that work can use.

use std::time::Duration;

use crate::helpers::spawn_app_with;

/// The pooled connections a worker opened are registered with its runtime
/// and die with it. Once the server has stopped, the idle ones are let go,
/// so the work that runs on opens connections of its own rather than
/// failing on a dead one.
#[tokio::test]
async fn at_a_stop_the_connections_stopped_workers_opened_are_let_go() {
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
            for conn in held {
                drop(conn.unwrap());
            }
            // Given back in tasks of this runtime.
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(pool.num_idle(), 2);
        });
    });
    worker.await.unwrap();

    app.stop_at_once().await;
    let now = tokio::time::Instant::now();
    assert!(app.state.connect.finish_work_under_way(now).await);
    for _ in 0..2 {
        let asked = sqlx::query_scalar::<_, i32>("SELECT 1").fetch_one(&app.state.db);
        let answered = tokio::time::timeout(Duration::from_secs(5), asked).await;
        assert_eq!(answered.expect("answered in time").unwrap(), 1);
    }
}
