//! Faults: the service against a Postgres of its own that is frozen,
//! stopped, restarted or short of connections. Every request gets a clear
//! answer within a bounded time, retryable where the fault is transient.

mod disconnect;
mod listening;
mod postgres;
pub mod relay;

use std::time::{Duration, Instant};

use serde_json::json;

pub use postgres::OwnPostgres;

use crate::helpers::{TestApp, spawn_app_on};

/// Connects `subject`'s demo account through the real flow. The tests then
/// call `connect`, which answers from the stored connection without asking
/// the provider: only the database is under test.
pub async fn connect(app: &TestApp, subject: &str) {
    crate::full_flow::connect_demo(app, subject, subject).await;
}

#[tokio::test]
async fn a_frozen_database_gets_retryable_answers_within_deadlines() {
    let pg = OwnPostgres::start(&[]);
    let app = spawn_app_on(&pg.url(), |_| {}).await;
    connect(&app, "alice").await;
    let (status, body) = app
        .call_tool("alice", "connect", json!({"provider": "demo"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["resultType"], "complete", "{body}");

    pg.freeze();
    let started = Instant::now();
    let ready = app
        .http
        .get(format!("{}/readyz", app.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    // Deadlines of 2 s (readiness) and 6 s (statements), with room for a
    // loaded machine: what is tested is that nothing waits for the
    // database's own timeouts or the client's (30 s).
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );

    let started = Instant::now();
    let body = crate::helpers::request(
        "tools/call",
        json!({"name": "connect", "arguments": {"provider": "demo"}}),
    );
    let answer = app
        .mcp_request(Some(&app.token("alice")), &body)
        .send()
        .await
        .unwrap();
    let took = started.elapsed();
    assert_eq!(answer.status(), 503, "{took:?}");
    assert!(answer.headers().get("retry-after").is_some());
    let text = answer.text().await.unwrap();
    assert!(text.contains("try again"), "{text}");
    assert!(took < Duration::from_secs(12), "{took:?}");

    // A page, too.
    let started = Instant::now();
    let page = app
        .http
        .get(format!("{}/connections", app.addr))
        .header(
            "Cookie",
            "mcp_connect_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 503);
    assert!(page.headers().get("retry-after").is_some());
    assert!(started.elapsed() < Duration::from_secs(12));

    pg.thaw();
    // Settles once the database is back.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = app
            .call_tool("alice", "connect", json!({"provider": "demo"}))
            .await;
        if status == 200 && body["result"]["resultType"] == "complete" {
            break;
        }
        assert!(Instant::now() < deadline, "never settled: {status} {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Every tool and resource that reads the user's connections answers a
/// frozen database within the statements' deadline (a read without one
/// waited for as long as the database stayed frozen).
#[tokio::test]
async fn a_frozen_database_gets_every_listing_and_disconnect_a_retryable_answer_in_time() {
    let pg = OwnPostgres::start(&[]);
    let app = spawn_app_on(&pg.url(), |_| {}).await;
    connect(&app, "alice").await;
    pg.freeze();
    let list = json!({"name": "connections_list", "arguments": {}});
    let disconnect = json!({"name": "disconnect", "arguments": {"provider": "demo"}});
    let read = json!({"uri": "connections://mine"});
    for (method, params) in [
        ("tools/call", list),
        ("tools/call", disconnect),
        ("resources/read", read),
    ] {
        let body = crate::helpers::request(method, params.clone());
        let started = Instant::now();
        let answer = tokio::time::timeout(
            Duration::from_secs(20),
            app.mcp_request(Some(&app.token("alice")), &body).send(),
        )
        .await
        .unwrap_or_else(|_| panic!("{method} {params} waited for the frozen database"))
        .unwrap();
        let took = started.elapsed();
        assert_eq!(answer.status(), 503, "{method} {params}: {took:?}");
        assert!(answer.headers().get("retry-after").is_some(), "{params}");
        assert!(took < Duration::from_secs(12), "{params}: {took:?}");
    }
    pg.thaw();
}

#[tokio::test]
async fn a_stopped_database_answers_mcp_with_503_not_an_internal_error() {
    let pg = OwnPostgres::start(&[]);
    let app = spawn_app_on(&pg.url(), |_| {}).await;
    connect(&app, "alice").await;
    pg.down();
    // A tool call, and a resource read: retryable, in HTTP terms too.
    let call = json!({"name": "connect", "arguments": {"provider": "demo"}});
    let read = json!({"uri": "connections://mine"});
    for (method, params) in [("tools/call", call), ("resources/read", read)] {
        let body = crate::helpers::request(method, params);
        let started = Instant::now();
        let answer = app
            .mcp_request(Some(&app.token("alice")), &body)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 503, "{method}");
        assert!(answer.headers().get("retry-after").is_some(), "{method}");
        let text = answer.text().await.unwrap();
        assert!(!text.contains("-32603"), "{method}: {text}");
        assert!(started.elapsed() < Duration::from_secs(12), "{method}");
    }
    pg.up();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = app
            .call_tool("alice", "connect", json!({"provider": "demo"}))
            .await;
        if status == 200 && body["result"]["resultType"] == "complete" {
            break;
        }
        assert!(Instant::now() < deadline, "never settled: {status} {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_database_frozen_while_a_provider_answers_a_refresh_ends_the_call_within_deadlines() {
    use crate::slow_refresh::{SlowGoogle, expire_all, store};
    use mcp_connect::{connect::vault::usable_token, domain::UserRef};

    let pg = OwnPostgres::start(&[]);
    let slow = SlowGoogle::start().await;
    let app = spawn_app_on(&pg.url(), |t| {
        slow.configure(t);
        let mut database = toml::Table::new();
        database.insert("statement_timeout_ms".into(), 1_000.into());
        t.insert("database".into(), toml::Value::Table(database));
    })
    .await;
    store(&app, "ann").await;
    expire_all(&app).await;
    let provider = app.state.connect.provider("google").unwrap();
    let issuer = app.dev.issuer();
    let started = Instant::now();
    let refreshing = usable_token(
        &app.state.connect,
        UserRef::new(&issuer, "ann"),
        provider,
        &[],
    );
    let freezing = async {
        // The refresh holds the row and waits for the provider.
        tokio::time::sleep(Duration::from_secs(1)).await;
        pg.freeze();
    };
    let (ended, ()) = tokio::join!(
        tokio::time::timeout(Duration::from_secs(40), refreshing),
        freezing
    );
    let took = started.elapsed();
    pg.thaw();
    let error = ended
        .expect("the call ends while the database stays frozen")
        .expect_err("nothing could be written");
    assert!(
        mcp_connect::db::faults::is_transient_chain(&error),
        "retryable: {error:#}"
    );
    // Three seconds of provider, a two-second deadline on the write, six
    // of trying again: far from the forty the test allows.
    assert!(took < Duration::from_secs(20), "{took:?}");
}

mod shutdown;
mod startup;
mod too_many_clients;

/// Pages whose statements have no deadline of their own (a connect link
/// opened signed out, here) still answer a frozen database within
/// `web.page_timeout_secs`: the 503 page with `Retry-After`.
#[tokio::test]
async fn a_page_answers_a_frozen_database_within_its_time_limit() {
    crate::logs::init();
    let pg = OwnPostgres::start(&[]);
    let app = spawn_app_on(&pg.url(), |t| {
        let mut web = toml::Table::new();
        web.insert("page_timeout_secs".into(), 3.into());
        t.insert("web".into(), web.into());
    })
    .await;
    let link = format!(
        "{}/connect?ticket=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        app.addr
    );
    // Pooled connections open and idle: a statement then waits on one of
    // them, not on a new connection (whose own timeout would answer).
    let warm = (0..4).map(|_| app.http.get(&link).send());
    for answer in futures::future::join_all(warm).await {
        assert_eq!(answer.unwrap().status(), 410);
    }
    pg.freeze();
    let started = Instant::now();
    let page = app.http.get(&link).send().await.unwrap();
    let took = started.elapsed();
    assert_eq!(page.status(), 503, "{took:?}");
    assert!(page.headers().get("retry-after").is_some());
    assert!(took < Duration::from_secs(8), "{took:?}");
    let text = page.text().await.unwrap();
    assert!(
        !text.contains("database did not answer"),
        "no internals: {text}"
    );
    // Answered like any page: its access line says so.
    let logged = crate::logs::captured().lines().any(|l| {
        l.contains("access_log") && l.contains("path=\"/connect\"") && l.contains("status=503")
    });
    assert!(logged, "no access line for the late page");
    pg.thaw();
}
