//! A provider that answers refreshes slowly holds a pooled connection (and
//! the row's lock) per refresh while it answers. Refreshes may take at
//! most half the pool, so pages, flows and stored connections still get
//! one.

use std::{
    sync::atomic::{AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use actix_web::{HttpResponse, web};
use mcp_connect::{
    connect::vault::{TokenState, usable_token},
    domain::UserRef,
};

use crate::helpers::{TestApp, spawn_app_with, store_connection_at};

/// How long the token endpoint takes to answer a refresh.
const SLOW: Duration = Duration::from_secs(3);

async fn slow_token(asked: web::Data<AtomicUsize>) -> HttpResponse {
    asked.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(SLOW).await;
    HttpResponse::Ok().json(serde_json::json!({
        "access_token": format!("fresh-{}", uuid::Uuid::new_v4()),
        "expires_in": 3600,
        "token_type": "Bearer",
    }))
}

/// Stores `subject`'s Google connection (tokens sealed as a connect would).
pub(crate) async fn store(app: &TestApp, subject: &str) {
    let issuer = app.dev.issuer();
    let user = UserRef::new(&issuer, subject);
    let access = format!("{subject}-access");
    let refresh = Some(format!("{subject}-refresh"));
    store_connection_at(
        &app.state.connect,
        user,
        "google",
        "openid",
        &access,
        refresh,
    )
    .await;
}

/// Google, whose token endpoint takes [`SLOW`] to answer a refresh.
pub(crate) struct SlowGoogle {
    google: provider_fakes::FakeProvider,
    token_endpoint: provider_fakes::server::Server,
    /// Refreshes the token endpoint has begun to answer.
    asked: web::Data<AtomicUsize>,
}

impl SlowGoogle {
    pub(crate) async fn start() -> Self {
        let asked = web::Data::new(AtomicUsize::new(0));
        let counter = asked.clone();
        Self {
            google: provider_fakes::google::start().await,
            token_endpoint: provider_fakes::server::start(move |cfg| {
                cfg.app_data(counter.clone())
                    .route("/token", web::post().to(slow_token));
            }),
            asked,
        }
    }

    /// Waits until the token endpoint is answering a refresh.
    pub(crate) async fn until_asked(&self) {
        for _ in 0..500 {
            if self.asked.load(Ordering::SeqCst) > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("no refresh reached the token endpoint");
    }

    /// `[providers.google]` in the app's settings table.
    pub(crate) fn configure(&self, t: &mut toml::Table) {
        let mut table = self.google.provider_table();
        table.insert(
            "token_url".into(),
            format!("{}/token", self.token_endpoint.base).into(),
        );
        let mut providers = toml::Table::new();
        providers.insert("google".into(), table.into());
        t.insert("providers".into(), providers.into());
    }
}

/// Makes every stored access token expired.
pub(crate) async fn expire_all(app: &TestApp) {
    sqlx::query("UPDATE connections SET access_token_expires_at = now() - interval '1 second'")
        .execute(&app.db)
        .await
        .unwrap();
}

#[tokio::test]
async fn refreshes_at_a_slow_provider_leave_pooled_connections_for_the_rest() {
    let slow = SlowGoogle::start().await;
    // Four connections: two pooled, two kept per worker thread.
    let app = spawn_app_with(|t| {
        t.insert("database_max_connections".into(), 4.into());
        slow.configure(t);
    })
    .await;
    for subject in ["ann", "ben", "cat"] {
        store(&app, subject).await;
    }
    expire_all(&app).await;

    let provider = app.state.connect.provider("google").unwrap();
    let issuer = app.dev.issuer();
    let refreshes = futures::future::join_all(["ann", "ben", "cat"].map(|subject| {
        usable_token(
            &app.state.connect,
            UserRef::new(&issuer, subject),
            provider,
            &[],
        )
    }));
    // Meanwhile a connection is stored (a pooled transaction).
    let meanwhile = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let started = Instant::now();
        store(&app, "dan").await;
        started.elapsed()
    };
    let (refreshed, took) = tokio::join!(refreshes, meanwhile);
    // Blocked, it would have waited for the provider's answer: at least
    // SLOW less the half second before it started. Anything well under
    // that is not waiting, however loaded the machine.
    assert!(
        took < SLOW - Duration::from_millis(1000),
        "storing waited for the refreshes: {took:?}"
    );
    for state in refreshed {
        assert!(matches!(state.unwrap(), TokenState::Usable(_)), "refreshed");
    }
}

/// A refresh holds its row while the provider answers, but not against the
/// rows that reference it: a client allowed on the connection meanwhile is
/// stored at once, not after the provider's answer (nor after a lock
/// timeout).
#[tokio::test]
async fn a_grant_on_a_connection_being_refreshed_does_not_wait_for_the_provider() {
    let slow = SlowGoogle::start().await;
    let app = spawn_app_with(|t| slow.configure(t)).await;
    store(&app, "ann").await;
    expire_all(&app).await;
    let id: uuid::Uuid = sqlx::query_scalar("SELECT id FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    let provider = app.state.connect.provider("google").unwrap();
    let issuer = app.dev.issuer();
    let refresh = usable_token(
        &app.state.connect,
        UserRef::new(&issuer, "ann"),
        provider,
        &[],
    );
    let meanwhile = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let started = Instant::now();
        let mut tx = app.db.begin().await.unwrap();
        sqlx::query("SET LOCAL lock_timeout = '2s'")
            .execute(&mut *tx)
            .await
            .unwrap();
        let inserted =
            mcp_connect::db::client_grants::insert(&mut *tx, id, "https://other.example/client")
                .await;
        tx.commit().await.unwrap();
        (inserted, started.elapsed())
    };
    let (refreshed, (inserted, took)) = tokio::join!(refresh, meanwhile);
    assert!(inserted.unwrap(), "the grant is stored");
    // As above: a grant blocked by the refresh would wait most of SLOW.
    assert!(
        took < SLOW - Duration::from_millis(1000),
        "the grant waited for the refresh: {took:?}"
    );
    assert!(matches!(refreshed.unwrap(), TokenState::Usable(_)));
}

/// More tokens due for a refresh at once than this instance refreshes at a
/// time, at a provider that answers slowly: a call whose turn does not
/// come in time is served the token it has, which is refreshed ahead of
/// its expiry and still lives, not told that the database did not answer.
#[tokio::test]
async fn a_refresh_whose_turn_does_not_come_in_time_serves_the_token_while_it_lives() {
    use secrecy::ExposeSecret as _;
    let slow = SlowGoogle::start().await;
    // Two pooled connections: one refresh at a time.
    let app = spawn_app_with(|t| {
        t.insert("database_max_connections".into(), 4.into());
        slow.configure(t);
    })
    .await;
    let subjects: Vec<String> = (0..9).map(|i| format!("user-{i}")).collect();
    for subject in &subjects {
        store(&app, subject).await;
    }
    // Due (within a minute of expiring), not expired.
    sqlx::query(
        "UPDATE connections SET tokens_stored_at = now() - interval '1 hour',
             access_token_expires_at = now() + interval '55 seconds'",
    )
    .execute(&app.db)
    .await
    .unwrap();

    let provider = app.state.connect.provider("google").unwrap();
    let issuer = app.dev.issuer();
    // Nine refreshes of SLOW each, one at a time: the last ones' turns
    // come after the twenty seconds a call waits for one.
    let states = futures::future::join_all(subjects.iter().map(|subject| {
        usable_token(
            &app.state.connect,
            UserRef::new(&issuer, subject),
            provider,
            &[],
        )
    }))
    .await;
    let mut served_as_stored = 0;
    for (subject, state) in subjects.iter().zip(states) {
        let token = match state {
            Ok(TokenState::Usable(token)) => token,
            other => panic!("{subject}: {other:?}"),
        };
        if token.access_token.expose_secret() == format!("{subject}-access") {
            served_as_stored += 1;
        }
    }
    assert!(served_as_stored >= 1, "every turn came in time");
}
