//! Delivery: signatures that verify, retries with backoff until a 2xx,
//! giving up after the retry window, an instance killed mid-delivery, and
//! two instances sharing the outbox.

use std::time::{Duration, Instant};

use mcp_connect::metrics::Delivery;

use super::{
    PATIENCE,
    receiver::{Mode, Receiver},
    with_webhooks,
};
use crate::helpers::{
    TestApp, count, plan_of_prepared, spawn_app, spawn_app_with, store_demo_connection,
};

const CREATED: &[&str] = &["connection.created"];

/// Waits until the outbox is empty and `apps` counted `delivered`
/// deliveries between them: each acknowledgement recorded (the row goes,
/// then the count), after which no event can be sent again.
async fn all_settled(apps: &[&TestApp], delivered: u64) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let counted: u64 = apps
            .iter()
            .map(|app| app.state.metrics.webhooks.count(Delivery::Delivered))
            .sum();
        let left = count(apps[0], "SELECT count(*) FROM event_outbox").await;
        if counted >= delivered && left == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{counted} of {delivered} deliveries recorded, {left} rows left"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `app` gave an event up (marked it failed).
async fn given_up(app: &TestApp) {
    let started = Instant::now();
    while count(
        app,
        "SELECT count(*) FROM event_outbox WHERE failed_at IS NOT NULL",
    )
    .await
        == 0
    {
        assert!(started.elapsed() < PATIENCE, "never given up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn while_its_secret_is_rotated_each_event_verifies_with_the_old_key_and_the_new() {
    use base64::{Engine, engine::general_purpose::STANDARD};
    // The receiver still checks with the secret being replaced.
    let receiver = Receiver::start(Mode::Answer {
        fail_first: 0,
        delay: Duration::ZERO,
    });
    let new_key = [7u8; 32];
    let app = spawn_app_with(|t| {
        let mut webhooks = super::webhooks_table(&receiver.url, CREATED, "");
        let ops = webhooks["endpoints"]["ops"].as_table_mut().unwrap();
        ops.insert(
            "secret".into(),
            format!("whsec_{}", STANDARD.encode(new_key)).into(),
        );
        ops.insert("previous_secret".into(), super::receiver::SECRET.into());
        t.insert("webhooks".into(), toml::Value::Table(webhooks));
    })
    .await;
    store_demo_connection(&app.state.connect, &app.dev.issuer(), "alice", "a-1", None).await;

    let acked = receiver.wait_for_acknowledged(1, PATIENCE).await;
    all_settled(&[&app], 1).await;
    assert_eq!(acked.len(), 1, "{acked:?}");
    let [attempt] = &receiver.attempts()[..] else {
        panic!("one attempt: {:?}", receiver.attempts())
    };
    assert!(attempt.verified, "the old key verifies: {attempt:?}");
    let signed = &attempt.signed;
    assert!(
        super::receiver::verify(
            &new_key,
            &attempt.id,
            &signed.timestamp,
            &signed.signatures,
            &signed.raw_body
        ),
        "the new key verifies: {attempt:?}"
    );
    assert_eq!(signed.signatures.split(' ').count(), 2, "{attempt:?}");
    assert!(
        !super::receiver::verify(
            &[8u8; 32],
            &attempt.id,
            &signed.timestamp,
            &signed.signatures,
            &signed.raw_body
        ),
        "no other key does"
    );
}

#[tokio::test]
async fn a_receiver_that_fails_twice_gets_each_event_acknowledged_once() {
    let receiver = Receiver::start(Mode::Answer {
        fail_first: 2,
        delay: Duration::ZERO,
    });
    let app = spawn_app_with(with_webhooks(&receiver.url, &[], "")).await;
    store_demo_connection(&app.state.connect, &app.dev.issuer(), "alice", "a-1", None).await;

    // connection.created and grant.created.
    let acked = receiver.wait_for_acknowledged(2, PATIENCE).await;
    all_settled(&[&app], 2).await;
    assert_eq!(acked.len(), 2, "{acked:?}");
    assert!(
        receiver.acknowledged().values().all(|n| *n == 1),
        "{acked:?}"
    );
    let attempts = receiver.attempts();
    assert_eq!(attempts.len(), 6, "{attempts:?}");
    assert!(attempts.iter().all(|a| a.verified), "{attempts:?}");
    for id in acked.keys() {
        let mine: Vec<_> = attempts.iter().filter(|a| &a.id == id).collect();
        let statuses: Vec<u16> = mine.iter().map(|a| a.status).collect();
        assert_eq!(statuses, [500, 500, 200], "{id}");
        // The same event each time, waiting longer before each retry.
        assert!(mine.iter().all(|a| a.body == mine[0].body));
        let (first, second) = (mine[1].at - mine[0].at, mine[2].at - mine[1].at);
        // (Lower bounds: a loaded machine only makes the waits longer.)
        assert!(first >= Duration::from_millis(200), "{first:?}");
        assert!(second >= Duration::from_millis(400), "{second:?}");
    }
    let webhooks = &app.state.metrics.webhooks;
    assert_eq!(webhooks.count(Delivery::Retry), 4);
    assert_eq!(webhooks.count(Delivery::Delivered), 2);
    assert_eq!(webhooks.count(Delivery::Failed), 0);
    assert_eq!(count(&app, "SELECT count(*) FROM event_outbox").await, 0);
    let shown = app.state.metrics.render(
        mcp_connect::metrics::DbGauges {
            pool_open: 0,
            pool_idle: 0,
            pool_max: 0,
            hot_open: 0,
            hot_overflowed: 0,
        },
        std::iter::empty(),
    );
    assert!(
        shown.contains("mcp_connect_webhook_deliveries_total{outcome=\"retry\"} 4\n"),
        "{shown}"
    );
    // Each failure is logged by the endpoint's name and the webhook-id,
    // without the URL, the body or the secret.
    let logs = crate::logs::captured();
    for id in acked.keys() {
        let lines: Vec<&str> = logs.lines().filter(|l| l.contains(id.as_str())).collect();
        let retries = lines
            .iter()
            .filter(|l| l.contains("will retry") && l.contains("answered HTTP 500"))
            .count();
        assert_eq!(retries, 2, "{lines:#?}");
        for line in lines {
            assert!(line.contains("endpoint=ops"), "{line}");
            assert!(!line.contains("/hook") && !line.contains("alice"), "{line}");
        }
    }
    let key = super::receiver::SECRET
        .trim_start_matches("whsec_")
        .to_owned();
    crate::logs::assert_absent(&[key]);
}

#[tokio::test]
async fn an_endpoint_that_never_accepts_is_given_up_and_the_event_kept() {
    let receiver = Receiver::start(Mode::Answer {
        fail_first: usize::MAX,
        delay: Duration::ZERO,
    });
    let app = spawn_app_with(with_webhooks(&receiver.url, CREATED, "retry_for_secs = 1")).await;
    store_demo_connection(&app.state.connect, &app.dev.issuer(), "alice", "a-1", None).await;
    given_up(&app).await;
    let (attempts, error): (i32, String) =
        sqlx::query_as("SELECT attempts, last_error FROM event_outbox")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert!(attempts >= 2, "retried first: {attempts}");
    assert_eq!(error, "answered HTTP 500");
    // Counted once the row's mark is committed: a moment after it shows.
    let started = Instant::now();
    while app.state.metrics.webhooks.count(Delivery::Failed) == 0 {
        assert!(
            started.elapsed() < PATIENCE,
            "the give-up was never counted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(app.state.metrics.webhooks.count(Delivery::Failed), 1);
    // Kept, and not tried again.
    let tried = receiver.arrived();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(receiver.arrived(), tried);
    assert_eq!(count(&app, "SELECT count(*) FROM event_outbox").await, 1);
}

#[tokio::test]
async fn an_instance_killed_mid_delivery_loses_no_event() {
    let receiver = Receiver::start(Mode::Hang);
    // The first instance only owns the database; it delivers nothing.
    let owner = spawn_app().await;
    let doomed = owner
        .second_instance_with(with_webhooks(&receiver.url, CREATED, ""))
        .await;
    store_demo_connection(
        &doomed.state.connect,
        &owner.dev.issuer(),
        "alice",
        "a-1",
        None,
    )
    .await;
    let hung = receiver.wait_for_attempts(1, PATIENCE).await;
    assert_eq!(receiver.arrived(), 1, "{hung:?}");
    // When the lease lapses, by the database's clock (the instance claimed
    // the row a moment before the receiver saw the attempt); read from
    // before the question, so no later than it does.
    let asked = Instant::now();
    let lease_left_ms = count(
        &owner,
        "SELECT (extract(epoch FROM next_attempt_at - clock_timestamp()) * 1000)::int8 \
         FROM event_outbox",
    )
    .await;
    let lease_lapses = asked + Duration::from_millis(lease_left_ms.max(0) as u64);
    drop(doomed);
    // Dead: it neither settles nor retries (it would after its 2 s timeout).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(receiver.arrived(), 1, "the killed instance went on");
    assert_eq!(count(&owner, "SELECT count(*) FROM event_outbox").await, 1);

    receiver.set_mode(Mode::Answer {
        fail_first: 0,
        delay: Duration::ZERO,
    });
    let heir = owner
        .second_instance_with(with_webhooks(&receiver.url, CREATED, ""))
        .await;
    let acked = receiver.wait_for_acknowledged(1, PATIENCE).await;
    assert_eq!(acked.len(), 1, "delivered by the other instance");
    let delivered = receiver
        .attempts()
        .into_iter()
        .find(|a| a.status == 200)
        .unwrap();
    // After the lease (timeout 2 s, twice the database's 6 s deadline,
    // 2 s more) lapsed, not before (the heir
    // started more than 3 s before it did; the margin is the rounding of
    // the database's timestamps).
    assert!(
        delivered.at + Duration::from_millis(50) >= lease_lapses,
        "delivered {:?} before the lease lapsed",
        lease_lapses - delivered.at
    );
    assert!(delivered.verified);
    assert_eq!(delivered.body["type"], "connection.created");
    // Settled just after the answer.
    let started = Instant::now();
    while heir.state.metrics.webhooks.count(Delivery::Delivered) == 0 {
        assert!(started.elapsed() < PATIENCE, "never settled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(heir.state.metrics.webhooks.count(Delivery::Delivered), 1);
    assert_eq!(count(&owner, "SELECT count(*) FROM event_outbox").await, 0);
}

#[tokio::test]
async fn two_instances_never_deliver_one_event_at_the_same_time() {
    // Slow answers, each event refused once: many claims, long in flight.
    let receiver = Receiver::start(Mode::Answer {
        fail_first: 1,
        delay: Duration::from_millis(150),
    });
    let one = spawn_app_with(with_webhooks(&receiver.url, CREATED, "first_retry_ms = 10")).await;
    let two = one
        .second_instance_with(with_webhooks(&receiver.url, CREATED, "first_retry_ms = 10"))
        .await;
    const EVENTS: usize = 24;
    for i in 0..EVENTS {
        let app = if i % 2 == 0 { &one } else { &two };
        let user = format!("user{i}");
        store_demo_connection(&app.state.connect, &one.dev.issuer(), &user, "t", None).await;
    }
    let acked = receiver.wait_for_acknowledged(EVENTS, PATIENCE).await;
    all_settled(&[&one, &two], EVENTS as u64).await;
    assert_eq!(acked.len(), EVENTS);
    assert!(
        receiver.acknowledged().values().all(|n| *n == 1),
        "{acked:?}"
    );
    assert_eq!(receiver.overlaps(), Vec::<String>::new());
    // One refusal and one acknowledgement per event: no attempt twice.
    assert_eq!(receiver.attempts().len(), 2 * EVENTS);
    let delivered =
        |app: &crate::helpers::TestApp| app.state.metrics.webhooks.count(Delivery::Delivered);
    assert_eq!(delivered(&one) + delivered(&two), EVENTS as u64);
    assert_eq!(count(&one, "SELECT count(*) FROM event_outbox").await, 0);
}

#[tokio::test]
async fn failed_and_abandoned_events_are_swept_after_their_retention() {
    // No endpoint: nothing delivers; the rows are put there as they would be.
    let app = spawn_app().await;
    sqlx::raw_sql(
        "INSERT INTO event_outbox (event_id, endpoint, event_type, payload, created_at, next_attempt_at, failed_at)
         VALUES (gen_random_uuid(), 'ops', 'connection.created', '{}', now() - interval '9 days', now() - interval '9 days', now() - interval '8 days'),
                (gen_random_uuid(), 'ops', 'connection.created', '{}', now() - interval '2 days', now() - interval '2 days', now() - interval '1 day'),
                (gen_random_uuid(), 'gone', 'connection.created', '{}', now() - interval '9 days', now() - interval '9 days', NULL),
                (gen_random_uuid(), 'ops', 'connection.created', '{}', now() - interval '3 days', now() - interval '3 days', NULL)",
    )
    .execute(&app.db)
    .await
    .unwrap();
    // Failed 8 days ago (past the 7-day retention), and never tried in 9
    // days (past the day of retries and the retention): gone.
    let deleted = mcp_connect::sweeper::sweep_outbox(&app.db, &app.state.settings.webhooks)
        .await
        .unwrap();
    assert_eq!(deleted, 2);
    assert_eq!(count(&app, "SELECT count(*) FROM event_outbox").await, 2);
}

#[tokio::test]
async fn an_endpoint_this_instance_does_not_know_is_left_to_the_instances_that_do() {
    // During a rolling change of the configuration: an instance that knows
    // only `ops`, and rows for a new endpoint `audit` already written.
    let ops = Receiver::start(Mode::Answer {
        fail_first: 0,
        delay: Duration::ZERO,
    });
    let app = spawn_app_with(with_webhooks(&ops.url, CREATED, "")).await;
    let event = uuid::Uuid::new_v4();
    sqlx::query(
        "INSERT INTO event_outbox (event_id, endpoint, event_type, payload)
         VALUES ($1, 'audit', 'connection.created', '{\"type\": \"connection.created\"}')",
    )
    .bind(event)
    .execute(&app.db)
    .await
    .unwrap();
    // The old instance delivers its own endpoint's events meanwhile.
    store_demo_connection(&app.state.connect, &app.dev.issuer(), "alice", "a-1", None).await;
    ops.wait_for_acknowledged(1, PATIENCE).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (attempts, failed): (i32, bool) = sqlx::query_as(
        "SELECT attempts, failed_at IS NOT NULL FROM event_outbox WHERE endpoint = 'audit'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!((attempts, failed), (0, false), "not claimed, not failed");

    // An instance that knows `audit` delivers it.
    let audit = Receiver::start(Mode::Answer {
        fail_first: 0,
        delay: Duration::ZERO,
    });
    let mut table = super::webhooks_table(&audit.url, &[], "");
    if let Some(toml::Value::Table(endpoints)) = table.get_mut("endpoints")
        && let Some(ops) = endpoints.remove("ops")
    {
        endpoints.insert("audit".into(), ops);
    }
    let _new = app
        .second_instance_with(|t| {
            t.insert("webhooks".into(), toml::Value::Table(table));
        })
        .await;
    let acked = audit.wait_for_acknowledged(1, PATIENCE).await;
    assert!(
        acked.contains_key(&format!("msg_{}", event.simple())),
        "{acked:?}"
    );
    // Deleted once the answer is back at the instance, a moment after the
    // receiver sent it.
    let started = Instant::now();
    while count(
        &app,
        "SELECT count(*) FROM event_outbox WHERE endpoint = 'audit'",
    )
    .await
        != 0
    {
        assert!(started.elapsed() < PATIENCE, "the delivered row stays");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An endpoint that never answers (each attempt waits out the timeout)
/// holds up its own events only: another endpoint's arrive at once, though
/// the slow one's older events were due first.
#[tokio::test]
async fn a_hanging_endpoint_delays_no_other_endpoints_events() {
    let slow = Receiver::start(Mode::Hang);
    let ops = Receiver::start(Mode::Answer {
        fail_first: 0,
        delay: Duration::ZERO,
    });
    let mut table = super::webhooks_table(&ops.url, CREATED, "");
    if let Some(toml::Value::Table(endpoints)) = table.get_mut("endpoints")
        && let Some(toml::Value::Table(mut hang)) = endpoints.get("ops").cloned()
    {
        hang.insert("url".into(), slow.url.clone().into());
        endpoints.insert("slow".into(), toml::Value::Table(hang));
    }
    let app = spawn_app_with(|t| {
        t.insert("webhooks".into(), toml::Value::Table(table));
    })
    .await;
    // Enough of the slow endpoint's events, due before ours, to fill
    // several claims.
    sqlx::query(
        "INSERT INTO event_outbox (event_id, endpoint, event_type, payload, next_attempt_at)
         SELECT gen_random_uuid(), 'slow', 'connection.created',
                '{\"type\": \"connection.created\"}', now() - interval '1 minute'
         FROM generate_series(1, 48)",
    )
    .execute(&app.db)
    .await
    .unwrap();
    slow.wait_for_attempts(1, PATIENCE).await;
    let stored = Instant::now();
    store_demo_connection(&app.state.connect, &app.dev.issuer(), "alice", "a-1", None).await;
    ops.wait_for_acknowledged(1, PATIENCE).await;
    // Behind the slow endpoint's events, ours would wait for at least two
    // more of its claims, each waiting out its 2 s timeout.
    assert!(
        stored.elapsed() < Duration::from_secs(3),
        "{:?}",
        stored.elapsed()
    );
    // The backlog gauge is counted all the same (every 10 s, on a timer of
    // its own, not between one endpoint's deliveries).
    let started = Instant::now();
    while app.state.metrics.webhooks.backlog() < 48 {
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "backlog {}",
            app.state.metrics.webhooks.backlog()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The retry window is tried to its end: a backoff that would land past
/// it is cut to its close, and only an attempt failed then gives up.
#[tokio::test]
async fn retries_go_on_until_the_retry_window_closes() {
    let receiver = Receiver::start(Mode::Answer {
        fail_first: usize::MAX,
        delay: Duration::ZERO,
    });
    let app = spawn_app_with(with_webhooks(
        &receiver.url,
        CREATED,
        "retry_for_secs = 2\nfirst_retry_ms = 1500",
    ))
    .await;
    store_demo_connection(&app.state.connect, &app.dev.issuer(), "alice", "a-1", None).await;
    given_up(&app).await;
    let (lived, attempts): (f64, i32) = sqlx::query_as(
        "SELECT extract(epoch FROM failed_at - created_at)::float8, attempts FROM event_outbox",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    // Tried at once, after 1.5 s, and when the window closed at 2 s (the
    // next backoff, 3 s, had ended it at 1.5 s); a loaded machine may fold
    // the last two into one.
    assert!(lived >= 2.0, "gave up {lived} s after it was written");
    assert!((2..=3).contains(&attempts), "{attempts}");
}

/// An endpoint's deliverer claims its own due rows without reading
/// another endpoint's: a removed endpoint's backlog of 20,000 due rows
/// leaves the claim for `ops` an index scan of `ops`'s rows, stopped at
/// its batch. (On the index by due time alone, each poll of every other
/// endpoint walked the whole backlog.)
#[tokio::test]
async fn another_endpoints_backlog_is_not_read_by_a_claim() {
    // No endpoint configured: nothing claims while the test does.
    let app = spawn_app().await;
    sqlx::raw_sql(
        "INSERT INTO event_outbox (event_id, endpoint, event_type, payload, next_attempt_at)
         SELECT gen_random_uuid(), 'gone', 'connection.created', '{}', now() - interval '1 hour'
         FROM generate_series(1, 20000);
         INSERT INTO event_outbox (event_id, endpoint, event_type, payload, next_attempt_at)
         SELECT gen_random_uuid(), 'ops', 'connection.created', '{}', now() - interval '1 minute'
         FROM generate_series(1, 3);
         ANALYZE event_outbox;",
    )
    .execute(&app.db)
    .await
    .unwrap();

    // The statement as the claim prepared it, on the same connection.
    let mut conn = app.db.acquire().await.unwrap();
    let claimed =
        mcp_connect::db::event_outbox::claim_due(&mut *conn, uuid::Uuid::new_v4(), 30.0, 16, "ops")
            .await
            .unwrap();
    assert_eq!(claimed.len(), 3);
    assert!(claimed.iter().all(|row| row.endpoint == "ops"));
    let plan = plan_of_prepared(
        &mut conn,
        "%UPDATE event_outbox o%",
        &format!("'{}', 30, 16, 'ops'", uuid::Uuid::new_v4()),
    )
    .await;
    assert!(plan.contains("event_outbox_due_by_endpoint"), "{plan}");
    assert!(!plan.contains("Seq Scan"), "{plan}");
}

/// The events of a removed endpoint stay in the backlog gauge until the
/// sweeper deletes them, also on an instance that has no endpoint left.
#[tokio::test]
async fn the_backlog_is_counted_without_an_endpoint() {
    let app = spawn_app().await;
    sqlx::raw_sql(
        "INSERT INTO event_outbox (event_id, endpoint, event_type, payload)
         VALUES (gen_random_uuid(), 'gone', 'connection.created', '{}')",
    )
    .execute(&app.db)
    .await
    .unwrap();
    // Started after the row was written: its first count finds it.
    let restarted = app.second_instance().await;
    let deadline = Instant::now() + PATIENCE;
    while restarted.state.metrics.webhooks.backlog() != 1 {
        assert!(Instant::now() < deadline, "the backlog was never counted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A receiver that redirects is not followed, and the row's error says so
/// and where to (the host only: a redirect's path or query may carry a
/// token).
#[tokio::test]
async fn a_redirect_is_not_followed_and_the_error_says_why() {
    let receiver = Receiver::start(Mode::Redirect);
    let app = spawn_app_with(with_webhooks(&receiver.url, CREATED, "retry_for_secs = 1")).await;
    store_demo_connection(&app.state.connect, &app.dev.issuer(), "alice", "a-1", None).await;
    given_up(&app).await;
    let error: String = sqlx::query_scalar("SELECT last_error FROM event_outbox")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert!(
        error.contains("HTTP 308")
            && error.contains("redirect")
            && error.contains("elsewhere.example")
            && error.contains("not followed"),
        "{error}"
    );
    assert!(!error.contains("token"), "{error}");
}

/// The sweep's two deletes of the outbox read their own partial index, in
/// order, and stop at their batch: a removed endpoint's backlog of 20,000
/// abandoned rows is not read by the delete of failed rows, nor all of it
/// by each batch of its own.
#[tokio::test]
async fn the_sweeps_outbox_deletes_read_their_own_index_only() {
    let app = spawn_app().await;
    sqlx::raw_sql(
        "INSERT INTO event_outbox (event_id, endpoint, event_type, payload, created_at, next_attempt_at)
         SELECT gen_random_uuid(), 'gone', 'connection.created', '{}',
                now() - interval '9 days', now() - interval '9 days'
         FROM generate_series(1, 20000);
         INSERT INTO event_outbox (event_id, endpoint, event_type, payload, failed_at)
         SELECT gen_random_uuid(), 'ops', 'connection.created', '{}', now() - interval '8 days'
         FROM generate_series(1, 3);
         ANALYZE event_outbox;",
    )
    .execute(&app.db)
    .await
    .unwrap();
    let mut conn = app.db.acquire().await.unwrap();
    let week = Duration::from_secs(7 * 86_400);
    let failed = mcp_connect::db::event_outbox::delete_failed(&mut *conn, week, 500)
        .await
        .unwrap();
    assert_eq!(failed, 3);
    let abandoned = mcp_connect::db::event_outbox::delete_abandoned(&mut *conn, week, 500)
        .await
        .unwrap();
    assert_eq!(abandoned, 500);
    for (shape, index) in [
        ("%WHERE failed_at < now()%", "event_outbox_failed"),
        (
            "%WHERE failed_at IS NULL AND next_attempt_at <%",
            "event_outbox_due",
        ),
    ] {
        let plan = plan_of_prepared(&mut conn, shape, "604800, 500").await;
        assert!(plan.contains(index), "{plan}");
        assert!(
            !plan.contains("Seq Scan") && !plan.contains("BitmapOr"),
            "{plan}"
        );
    }
}

/// The pooled connections under the deliverer go silent (a NAT dropped
/// their mapping; nothing says they are gone): its database steps give up
/// after their deadline and it goes on over new connections, instead of
/// waiting on a claim that never answers while events pile up.
#[tokio::test]
async fn deliveries_go_on_after_the_connections_under_them_go_silent() {
    use crate::{faults::relay::Relay, helpers::server_url};
    let relay = Relay::to_test_server().await;
    let receiver = Receiver::start(Mode::Answer {
        fail_first: 0,
        delay: Duration::ZERO,
    });
    let app = crate::helpers::spawn_app_on(&relay.url(), |t| {
        with_webhooks(&receiver.url, CREATED, "")(t);
        let mut database = toml::Table::new();
        database.insert("statement_timeout_ms".into(), 1000.into());
        t.insert("database".into(), database.into());
    })
    .await;
    let direct = sqlx::PgPool::connect(&format!("{}/{}", server_url(), app.db_name))
        .await
        .unwrap();
    // The deliverer polls; its connections are open when they fall silent.
    tokio::time::sleep(Duration::from_millis(300)).await;
    relay.silence_open_connections();
    sqlx::query(
        "INSERT INTO event_outbox (event_id, endpoint, event_type, payload)
         VALUES (gen_random_uuid(), 'ops', 'connection.created', '{}')",
    )
    .execute(&direct)
    .await
    .unwrap();
    let acknowledged = receiver
        .wait_for_acknowledged(1, Duration::from_secs(30))
        .await;
    assert_eq!(acknowledged.len(), 1, "{acknowledged:?}");
    // The app's own clean-up would go through the relay: its database is
    // dropped here, directly.
    let name = app.db_name.clone();
    drop(app);
    direct.close().await;
    crate::helpers::drop_database(&name).await;
}

/// A server that begins to stop claims no more events, and finishes the
/// delivery under way (its answer settled) before it exits, rather than
/// leaving the event to be sent again once its lease lapsed.
#[tokio::test]
async fn a_stopping_server_finishes_its_deliveries_and_claims_no_more() {
    // Answered well within the 2 s timeout, after the stop has begun.
    let receiver = Receiver::start(Mode::Answer {
        fail_first: 0,
        delay: Duration::from_millis(500),
    });
    let app = spawn_app_with(with_webhooks(&receiver.url, CREATED, "")).await;
    store_demo_connection(&app.state.connect, &app.dev.issuer(), "alice", "a-1", None).await;
    receiver.wait_for_attempts(1, PATIENCE).await;
    assert_eq!(receiver.arrived(), 1);
    // As a signal does: the server then drains its requests (the
    // background loops live on meanwhile), then waits for the work.
    app.state.begin_shutdown();
    let drain_ends = tokio::time::Instant::now() + Duration::from_secs(10);
    assert!(app.state.connect.finish_work_under_way(drain_ends).await);
    assert_eq!(app.state.metrics.webhooks.count(Delivery::Delivered), 1);
    assert_eq!(count(&app, "SELECT count(*) FROM event_outbox").await, 0);
    // An event written now is left to the instances still serving.
    store_demo_connection(&app.state.connect, &app.dev.issuer(), "bob", "b-1", None).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(receiver.arrived(), 1);
    assert_eq!(count(&app, "SELECT count(*) FROM event_outbox").await, 1);
}

/// An endpoint that refuses every event of a backlog gets each next batch
/// later than the last, not the whole backlog back to back.
#[tokio::test]
async fn an_endpoint_that_fails_whole_batches_gets_the_next_later() {
    let receiver = Receiver::start(Mode::Answer {
        fail_first: usize::MAX,
        delay: Duration::ZERO,
    });
    let app = spawn_app_with(with_webhooks(&receiver.url, &[], "first_retry_ms = 5000")).await;
    sqlx::query(
        "INSERT INTO event_outbox (event_id, endpoint, event_type, payload, next_attempt_at)
         SELECT gen_random_uuid(), 'ops', 'connection.created',
                '{\"type\": \"connection.created\"}', now() - interval '1 minute'
         FROM generate_series(1, 48)",
    )
    .execute(&app.db)
    .await
    .unwrap();
    receiver.wait_for_attempts(48, PATIENCE).await;
    // Each recorded once answered.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut at: Vec<Instant> = receiver.attempts().iter().map(|a| a.at).collect();
    at.sort();
    assert_eq!(at.len(), 48, "each event tried once");
    // Batches of 16: the second 100 ms (twice the 50 ms poll) after the
    // first failed, the third 200 ms after the second.
    let third_after_first = at[32] - at[0];
    assert!(
        third_after_first >= Duration::from_millis(280),
        "{third_after_first:?}"
    );
}
