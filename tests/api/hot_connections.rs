//! The per-request connections (`db::hot`): reused after a statement that
//! completed, never after one that was cancelled or failed, and bounded.

use std::time::Duration;

use mcp_connect::db::hot::HotConnections;

use crate::helpers::{TestApp, spawn_app};

fn hot(app: &TestApp, limit: usize) -> HotConnections {
    HotConnections::new((*app.db.connect_options()).clone(), limit, app.db.clone())
}

async fn backend_pid(hot: &HotConnections) -> i32 {
    let mut conn = hot.acquire().await.unwrap();
    let pid = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *conn)
        .await;
    conn.finish(&pid);
    pid.unwrap()
}

#[tokio::test]
async fn a_connection_whose_statement_completed_serves_the_next_request() {
    let app = spawn_app().await;
    let hot = hot(&app, 4);
    let first = backend_pid(&hot).await;
    let second = backend_pid(&hot).await;
    assert_eq!(first, second, "the same backend answers both");
    assert_eq!(hot.open(), 1);
}

#[tokio::test]
async fn a_cancelled_statement_closes_its_connection() {
    let app = spawn_app().await;
    let hot = hot(&app, 4);
    let before = backend_pid(&hot).await;
    let cancelled = tokio::time::timeout(Duration::from_millis(100), async {
        let mut conn = hot.acquire().await.unwrap();
        let slept = sqlx::query("SELECT pg_sleep(5)").execute(&mut *conn).await;
        conn.finish(&slept);
    })
    .await;
    assert!(cancelled.is_err(), "the statement was still running");
    let after = backend_pid(&hot).await;
    assert_ne!(
        before, after,
        "a connection left mid-statement is never reused"
    );
    // Its place is given back at once, though Postgres only notices the
    // closed socket when the sleep ends.
    assert_eq!(hot.open(), 1);
}

#[tokio::test]
async fn a_failed_statement_closes_its_connection() {
    let app = spawn_app().await;
    let hot = hot(&app, 4);
    let before = backend_pid(&hot).await;
    let mut conn = hot.acquire().await.unwrap();
    let failed = sqlx::query("SELECT 1/0").execute(&mut *conn).await;
    assert!(failed.is_err());
    conn.finish(&failed);
    assert_ne!(before, backend_pid(&hot).await);
}

#[tokio::test]
async fn beyond_the_limit_the_pool_serves() {
    let app = spawn_app().await;
    let hot = hot(&app, 1);
    let held = hot.acquire().await.unwrap();
    assert_eq!(hot.overflowed(), 0);
    // The one place is taken: this one comes from the shared pool.
    let mut extra = hot.acquire().await.unwrap();
    assert_eq!(hot.overflowed(), 1, "the pool's service is counted");
    let one: i32 = sqlx::query_scalar("SELECT 1")
        .fetch_one(&mut *extra)
        .await
        .unwrap();
    assert_eq!(one, 1);
    assert_eq!(hot.open(), 1);
    drop(extra);
    drop(held);
}

#[tokio::test]
async fn connections_of_another_database_are_never_handed_out() {
    let first = spawn_app().await;
    let second = spawn_app().await;
    let (a, b) = (hot(&first, 2), hot(&second, 2));
    backend_pid(&a).await;
    let mut conn = b.acquire().await.unwrap();
    let name: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(name, second.db_name);
}

#[tokio::test]
async fn an_idle_connection_past_its_time_is_closed_and_its_place_given_back() {
    let app = spawn_app().await;
    let hot = HotConnections::with_max_idle(
        (*app.db.connect_options()).clone(),
        1,
        app.db.clone(),
        Duration::from_millis(200),
    );
    let before = backend_pid(&hot).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The stale one is closed on the way; the place it held serves a new one.
    let after = backend_pid(&hot).await;
    assert_ne!(before, after);
    assert_eq!(hot.open(), 1);
}

/// The backend behind `run`, with the statement's own outcome.
async fn run_pid(hot: &HotConnections, fail: bool) -> Result<i32, sqlx::Error> {
    hot.run(async |conn| {
        let pid = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut *conn)
            .await?;
        if fail {
            sqlx::query("SELECT 1/0").execute(&mut *conn).await?;
        }
        Ok(pid)
    })
    .await
}

#[tokio::test]
async fn run_gives_the_connection_back_only_after_success() {
    let app = spawn_app().await;
    let hot = hot(&app, 4);
    let first = run_pid(&hot, false).await.unwrap();
    assert_eq!(first, run_pid(&hot, false).await.unwrap(), "reused");
    assert!(run_pid(&hot, true).await.is_err());
    let after_failure = run_pid(&hot, false).await.unwrap();
    assert_ne!(
        first, after_failure,
        "a failed statement's connection is closed"
    );
    assert_eq!(hot.open(), 1);
}

#[tokio::test]
async fn run_dropped_mid_statement_closes_its_connection() {
    let app = spawn_app().await;
    let hot = hot(&app, 4);
    let before = run_pid(&hot, false).await.unwrap();
    let cancelled = tokio::time::timeout(
        Duration::from_millis(100),
        hot.run(async |conn| sqlx::query("SELECT pg_sleep(5)").execute(conn).await),
    )
    .await;
    assert!(cancelled.is_err(), "the statement was still running");
    assert_ne!(before, run_pid(&hot, false).await.unwrap());
    assert_eq!(hot.open(), 1);
}

/// `f` on a thread of its own (with its own idle list), while this
/// thread's runtime goes on serving the sockets it opened.
async fn on_another_thread<T: Send + 'static>(
    hot: &HotConnections,
    f: impl AsyncFnOnce(&HotConnections) -> T + Send + 'static,
) -> T {
    let hot = hot.clone();
    tokio::task::spawn_blocking(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async move { f(&hot).await })
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn a_thread_with_a_connection_idle_for_a_second_gives_its_place_to_a_thread_that_found_none()
{
    let app = spawn_app().await;
    // The service's "a second" is three here: the steps before the sleep
    // (a statement on another thread, through the pool) must take less.
    let spare_after = Duration::from_secs(3);
    let hot = hot(&app, 2).with_spare_after(spare_after);
    // This thread takes both places, then leaves both connections idle.
    let first = hot.acquire().await.unwrap();
    let second = hot.acquire().await.unwrap();
    first.finish(&Ok::<(), ()>(()));
    second.finish(&Ok::<(), ()>(()));
    assert_eq!(hot.open(), 2);

    // Another thread finds every place taken: the pool serves it.
    on_another_thread(&hot, async |hot| backend_pid(hot).await).await;
    assert_eq!(hot.overflowed(), 1);

    // A moment later this thread still has one idle connection: needed
    // for a burst, perhaps; it keeps both.
    backend_pid(&hot).await;
    assert_eq!(hot.open(), 2, "a connection idle for a moment is kept");
    // Once one has waited that long unused, this thread's next statement
    // gives its place back.
    tokio::time::sleep(spare_after + Duration::from_millis(100)).await;
    backend_pid(&hot).await;
    assert_eq!(hot.open(), 1, "the spare connection was closed");

    // The other thread now opens a connection of its own.
    on_another_thread(&hot, async |hot| backend_pid(hot).await).await;
    assert_eq!(hot.overflowed(), 1, "no statement went to the pool");
    assert_eq!(hot.open(), 2);
}

#[tokio::test]
async fn a_thread_without_a_spare_keeps_its_connection_when_another_found_none() {
    let app = spawn_app().await;
    let hot = hot(&app, 1);
    let held = hot.acquire().await.unwrap();
    on_another_thread(&hot, async |hot| backend_pid(hot).await).await;
    assert_eq!(hot.overflowed(), 1);
    // Its only connection: still needed here, so it stays.
    held.finish(&Ok::<(), ()>(()));
    let before = backend_pid(&hot).await;
    assert_eq!(hot.open(), 1);
    assert_eq!(backend_pid(&hot).await, before);
}

/// [`hot`] with a wait for this thread's own connections of `wait`, and its
/// one connection already open (opening one takes longer than the tests'
/// steps).
async fn hot_waiting(app: &TestApp, wait: Duration) -> HotConnections {
    let hot = hot(app, 1).with_wait_for_own(wait);
    backend_pid(&hot).await;
    hot
}

/// Holds a connection of `hot` for `held`, then gives it back; its backend.
async fn hold_for(hot: &HotConnections, held: Duration) -> i32 {
    hot.run(async |conn| {
        let pid = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut *conn)
            .await?;
        sqlx::query("SELECT pg_sleep($1)")
            .bind(held.as_secs_f64())
            .execute(&mut *conn)
            .await?;
        Ok(pid)
    })
    .await
    .unwrap()
}

/// `backend_pid` once `after` has passed.
async fn pid_after(hot: &HotConnections, after: Duration) -> i32 {
    tokio::time::sleep(after).await;
    backend_pid(hot).await
}

#[tokio::test]
async fn a_thread_whose_places_are_in_use_waits_for_one_of_its_own() {
    let app = spawn_app().await;
    let hot = hot_waiting(&app, Duration::from_secs(10)).await;
    let (holder, waiter) = tokio::join!(
        hold_for(&hot, Duration::from_millis(300)),
        pid_after(&hot, Duration::from_millis(50)),
    );
    assert_eq!(holder, waiter, "the waiter got the connection given back");
    assert_eq!(hot.overflowed(), 0, "nothing went to the pool");
    assert_eq!(hot.open(), 1);
}

#[tokio::test]
async fn a_wait_past_its_time_goes_to_the_pool() {
    let app = spawn_app().await;
    let hot = hot_waiting(&app, Duration::from_millis(50)).await;
    let started = std::time::Instant::now();
    // The margins are seconds wide: a loaded machine stalls a test's
    // thread for a few hundred milliseconds now and then.
    let (_, waited) = tokio::join!(hold_for(&hot, Duration::from_secs(4)), async {
        pid_after(&hot, Duration::from_millis(20)).await;
        started.elapsed()
    });
    assert!(
        waited < Duration::from_secs(3),
        "served by the pool, not after the slow statement: {waited:?}"
    );
    assert_eq!(hot.overflowed(), 1);
}

#[tokio::test]
async fn no_more_statements_wait_than_the_thread_has_connections_out() {
    let app = spawn_app().await;
    let hot = hot_waiting(&app, Duration::from_secs(10)).await;
    let started = std::time::Instant::now();
    let (holder, first, second) = tokio::join!(
        hold_for(&hot, Duration::from_secs(4)),
        async {
            let pid = pid_after(&hot, Duration::from_millis(50)).await;
            (pid, started.elapsed())
        },
        async {
            let pid = pid_after(&hot, Duration::from_millis(100)).await;
            (pid, started.elapsed())
        },
    );
    assert_eq!(first.0, holder, "the first in line waited for it");
    assert_ne!(second.0, holder, "the second went to the pool");
    assert!(second.1 < Duration::from_secs(3), "{:?}", second.1);
    assert_eq!(hot.overflowed(), 1);
}

#[tokio::test]
async fn a_thread_with_no_connection_out_does_not_wait() {
    let app = spawn_app().await;
    let hot = hot_waiting(&app, Duration::from_secs(10)).await;
    let held = hot.acquire().await.unwrap();
    let waited = on_another_thread(&hot, async |hot| {
        let started = std::time::Instant::now();
        backend_pid(hot).await;
        started.elapsed()
    })
    .await;
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    assert_eq!(hot.overflowed(), 1);
    held.finish(&Ok::<(), ()>(()));
}

#[tokio::test]
async fn a_cancelled_wait_leaves_the_connection_for_the_next_request() {
    let app = spawn_app().await;
    let hot = hot_waiting(&app, Duration::from_secs(10)).await;
    let (holder, cancelled) = tokio::join!(
        // Held long past the wait's cut, however late this thread runs.
        hold_for(&hot, Duration::from_secs(2)),
        tokio::time::timeout(
            Duration::from_millis(100),
            pid_after(&hot, Duration::from_millis(20))
        ),
    );
    assert!(cancelled.is_err(), "the wait was cut short");
    assert_eq!(backend_pid(&hot).await, holder, "kept, not closed");
    assert_eq!(hot.open(), 1);
    assert_eq!(hot.overflowed(), 0);
}
