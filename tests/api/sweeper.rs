//! The sweeper on a backlog: it deletes in batches (each its own
//! transaction) with what refers to the rows, and a sweep cut short leaves
//! no lock behind for the other instances.

use std::time::{Duration, Instant};

use crate::helpers::{TestApp, server_url, spawn_app};

/// `n` tickets that expired two hours ago (past the sweeper's one-hour
/// grace), each with a connect flow that has not expired, and `live`
/// tickets that have not expired; returns the id of one expired ticket.
async fn backlog(app: &TestApp, n: i32, live: i32) -> uuid::Uuid {
    sqlx::query(
        "INSERT INTO connect_tickets (id, ticket_hash, issuer, subject, client_id, provider, expires_at)
         SELECT gen_random_uuid(), sha256(('old' || i)::bytea), 'i', 's', 'c', 'demo',
                now() - interval '2 hours'
           FROM generate_series(1, $1) AS i",
    )
    .bind(n)
    .execute(&app.db)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO oauth_flows (id, state_hash, kind, ticket_id, pkce_verifier, key_id, expires_at)
         SELECT gen_random_uuid(), sha256(('flow' || id)::bytea), 'connect', id, '\\x00', 'k',
                now() + interval '1 hour'
           FROM connect_tickets",
    )
    .execute(&app.db)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO connect_tickets (id, ticket_hash, issuer, subject, client_id, provider, expires_at)
         SELECT gen_random_uuid(), sha256(('live' || i)::bytea), 'i', 's', 'c', 'demo',
                now() + interval '5 minutes'
           FROM generate_series(1, $1) AS i",
    )
    .bind(live)
    .execute(&app.db)
    .await
    .unwrap();
    sqlx::query_scalar("SELECT id FROM connect_tickets WHERE expires_at < now() LIMIT 1")
        .fetch_one(&app.db)
        .await
        .unwrap()
}

async fn count(app: &TestApp, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(&app.db).await.unwrap()
}

#[tokio::test]
async fn a_backlog_larger_than_a_batch_goes_with_what_refers_to_it() {
    let app = spawn_app().await;
    let pending = backlog(&app, 2500, 3).await;
    // A browser session still looking at one of the expired tickets.
    sqlx::query(
        "INSERT INTO web_sessions (id, id_hash, issuer, subject, csrf_secret, expires_at, pending_ticket_id)
         VALUES (gen_random_uuid(), '\\x01', 'i', 's', '\\x02', now() + interval '1 hour', $1)",
    )
    .bind(pending)
    .execute(&app.db)
    .await
    .unwrap();

    let swept = mcp_connect::sweeper::sweep_once(&app.db, app.state.settings.audit.retention())
        .await
        .unwrap();

    assert_eq!(swept, Some(2500), "five batches of tickets, nothing else");
    assert_eq!(count(&app, "SELECT count(*) FROM connect_tickets").await, 3);
    assert_eq!(
        count(&app, "SELECT count(*) FROM oauth_flows").await,
        0,
        "the expired tickets' flows went with them"
    );
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM web_sessions WHERE pending_ticket_id IS NULL"
        )
        .await,
        1,
        "the session stays and forgets the ticket"
    );
}

#[tokio::test]
async fn a_sweep_cut_short_leaves_no_lock_for_the_other_instances() {
    let app = spawn_app().await;
    backlog(&app, 20_000, 0).await;
    let sweeping = tokio::spawn({
        let db = app.db.clone();
        let retention = app.state.settings.audit.retention();
        async move { mcp_connect::sweeper::sweep_once(&db, retention).await }
    });
    // Cut the sweep short once it holds its lock and has deleted a batch.
    let started = Instant::now();
    loop {
        let left = count(&app, "SELECT count(*) FROM connect_tickets").await;
        if left < 20_000 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the sweep never started"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    sweeping.abort();
    assert!(sweeping.await.unwrap_err().is_cancelled());
    let left = count(&app, "SELECT count(*) FROM connect_tickets").await;
    assert!(
        left > 0,
        "the sweep was cut short before the end of the backlog"
    );

    // Another instance: its own pool on the same database. The lock went
    // with the cut sweep's connection (closed, not back in the pool), so
    // this one gets it, soon, and finishes the backlog.
    let other = sqlx::PgPool::connect(&format!("{}/{}", server_url(), app.db_name))
        .await
        .unwrap();
    let started = Instant::now();
    let swept = loop {
        let swept = mcp_connect::sweeper::sweep_once(&other, app.state.settings.audit.retention())
            .await
            .unwrap();
        if let Some(n) = swept {
            break n;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the cut sweep's lock is still held"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // A batch in flight when the sweep was cut may still have committed.
    assert!(swept > 0 && swept <= left as u64, "{swept} of {left}");
    assert_eq!(count(&app, "SELECT count(*) FROM connect_tickets").await, 0);
    other.close().await;
}

#[tokio::test]
async fn a_hold_off_keeps_every_sweep_away_until_it_is_closed() {
    let app = spawn_app().await;
    backlog(&app, 10, 0).await;
    let options =
        mcp_connect::db::connect_options(&format!("{}/{}", server_url(), app.db_name).into())
            .unwrap();
    let held = mcp_connect::sweeper::hold_off(options).await.unwrap();
    let retention = app.state.settings.audit.retention();

    let swept = mcp_connect::sweeper::sweep_once(&app.db, retention)
        .await
        .unwrap();
    assert_eq!(swept, None, "a sweep skips its turn while held off");
    assert_eq!(
        count(&app, "SELECT count(*) FROM connect_tickets").await,
        10
    );

    held.release().await.unwrap();
    let swept = mcp_connect::sweeper::sweep_once(&app.db, retention)
        .await
        .unwrap();
    assert_eq!(swept, Some(10), "sweeps resume once the hold is closed");
}

#[tokio::test]
async fn a_ticket_renewed_while_its_batch_waited_for_it_is_kept() {
    use sqlx::Connection;

    let app = spawn_app().await;
    let renewed = backlog(&app, 3, 0).await;
    // Another transaction holds the expired ticket's row and gives it a new
    // expiry: the batch below finds it expired (its snapshot predates the
    // change) and then has to wait for that row. (The `id IN (…)` form of
    // the batch deleted it; see `db::expiry::delete_batch`.)
    let url = format!("{}/{}", server_url(), app.db_name);
    let mut other = sqlx::PgConnection::connect(&url).await.unwrap();
    let mut renewal = other.begin().await.unwrap();
    sqlx::query("UPDATE connect_tickets SET expires_at = now() + interval '1 hour' WHERE id = $1")
        .bind(renewed)
        .execute(&mut *renewal)
        .await
        .unwrap();

    let pool = app.db.clone();
    let batch = tokio::spawn(async move {
        mcp_connect::db::expiry::delete_batch(
            &pool,
            mcp_connect::db::expiry::Expiring::Tickets,
            chrono::Duration::hours(1),
            500,
        )
        .await
    });
    crate::helpers::until_blocked(&app, 1).await;
    renewal.commit().await.unwrap();

    let deleted = batch.await.unwrap().unwrap();
    assert_eq!(deleted, 2, "the two still expired went");
    let left: Vec<uuid::Uuid> = sqlx::query_scalar("SELECT id FROM connect_tickets")
        .fetch_all(&app.db)
        .await
        .unwrap();
    assert_eq!(
        left,
        vec![renewed],
        "the renewed ticket is checked again and stays"
    );
}

/// A `requestState` names its ticket for as long as it lives, and the retry
/// carrying it reads its answer there (an added account, a decline): with
/// states that outlive tickets by a day, expired tickets are kept a day,
/// while flows and sessions keep the usual hour.
#[tokio::test]
async fn expired_tickets_are_kept_as_long_as_a_request_state_lives() {
    let app = crate::helpers::spawn_app_with(|t| {
        t.insert(
            "flow".into(),
            toml::Value::Table(toml::from_str("request_state_ttl_secs = 86400").unwrap()),
        );
    })
    .await;
    for (name, expired_hours_ago) in [("recent", 2), ("old", 25)] {
        sqlx::query(
            "INSERT INTO connect_tickets (id, ticket_hash, issuer, subject, client_id, provider, expires_at)
             VALUES (gen_random_uuid(), sha256($1::bytea), 'i', 's', 'c', 'demo',
                     now() - make_interval(hours => $2))",
        )
        .bind(name.as_bytes())
        .bind(expired_hours_ago)
        .execute(&app.db)
        .await
        .unwrap();
    }
    sqlx::query(
        "INSERT INTO web_sessions (id, id_hash, issuer, subject, csrf_secret, expires_at)
         VALUES (gen_random_uuid(), '\\x01', 'i', 's', '\\x02', now() - interval '2 hours')",
    )
    .execute(&app.db)
    .await
    .unwrap();

    let swept = mcp_connect::sweeper::sweep_all(
        &app.db,
        &app.state.settings,
        mcp_connect::sweeper::Pace::SHARED,
    )
    .await
    .unwrap()
    .expect("the lock was free");

    assert_eq!(swept.deleted, 2, "the day-old ticket and the session");
    let left: Vec<Vec<u8>> = sqlx::query_scalar("SELECT ticket_hash FROM connect_tickets")
        .fetch_all(&app.db)
        .await
        .unwrap();
    let recent: Vec<u8> = sqlx::query_scalar("SELECT sha256('recent'::bytea)")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(left, vec![recent]);
    assert_eq!(count(&app, "SELECT count(*) FROM web_sessions").await, 0);
}

/// A sweep holds its own connection, not one of the pool's: with the
/// smallest `database_max_connections` (one pooled connection), a sweep
/// waiting on a row leaves the pool to pages and flows.
#[tokio::test]
async fn a_sweep_takes_no_connection_from_the_pool() {
    use sqlx::Connection;

    let app = crate::helpers::spawn_app_with(|t| {
        t.insert("database_max_connections".into(), 2.into());
    })
    .await;
    let held = backlog(&app, 3, 0).await;
    // Another transaction holds one expired ticket: the sweep's batch waits
    // for it, holding its connection.
    let url = format!("{}/{}", server_url(), app.db_name);
    let mut other = sqlx::PgConnection::connect(&url).await.unwrap();
    let mut holding = other.begin().await.unwrap();
    sqlx::query("SELECT id FROM connect_tickets WHERE id = $1 FOR UPDATE")
        .bind(held)
        .execute(&mut *holding)
        .await
        .unwrap();

    let sweeping = tokio::spawn({
        // The application's own pool (`app.db` is the test's).
        let (pool, settings) = (app.state.db.clone(), app.state.settings.clone());
        async move {
            mcp_connect::sweeper::sweep_all(&pool, &settings, mcp_connect::sweeper::Pace::SHARED)
                .await
        }
    });
    crate::helpers::until_blocked(&app, 1).await;
    assert_eq!(app.state.db.options().get_max_connections(), 1);
    let page = tokio::time::timeout(Duration::from_secs(2), app.state.db.acquire()).await;
    assert!(
        matches!(page, Ok(Ok(_))),
        "the pool's one connection is the sweep's"
    );
    drop(page);
    holding.rollback().await.unwrap();
    let swept = sweeping
        .await
        .unwrap()
        .unwrap()
        .expect("this sweep had the lock");
    assert_eq!(swept.deleted, 3);
}
