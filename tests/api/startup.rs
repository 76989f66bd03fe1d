//! What stops `serve` before it listens, and what keeps it not ready.

use std::{
    net::TcpListener,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use actix_web::{HttpResponse, web};
use mcp_connect::{config::Settings, startup::Application};
use serde_json::json;
use sqlx::Connection;

use crate::helpers::{TestApp, spawn_app_with};

fn settings(extra: &str) -> Settings {
    let table: toml::Table = format!(
        r#"
        public_url = "https://connect.example.com"
        database_url = "postgres://127.0.0.1/never_created"
        keys = ["k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="]
        {extra}
        "#
    )
    .parse()
    .expect("toml");
    Settings::from_sources(None, Vec::new(), table).expect("settings load")
}

async fn refusal(extra: &str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    match Application::build_with_listener(settings(extra), listener, None).await {
        Ok(_) => panic!("started with {extra}"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn serve_refuses_to_start_without_a_provider_or_a_web_client() {
    let err =
        refusal("[auth]\nissuer = \"https://idp.example.com\"\nweb_client_id = \"web\"").await;
    assert!(err.contains("`providers`"), "{err}");
    let err = refusal(
        "[auth]\nissuer = \"https://idp.example.com\"\n\
         [providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"",
    )
    .await;
    assert!(
        err.contains("`auth.web_client_id`") && err.contains("MCP_CONNECT_AUTH__WEB_CLIENT_ID"),
        "{err}"
    );
}

#[tokio::test]
async fn serve_refuses_a_webhook_endpoint_inside_the_network_unless_allowed() {
    let err = refusal(
        "[auth]\nissuer = \"https://idp.example.com\"\nweb_client_id = \"web\"\n\
         [providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
         [webhooks.endpoints.ops]\nurl = \"https://10.0.0.5/hook\"\n\
         secret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"",
    )
    .await;
    assert!(
        err.contains("webhooks.endpoints.ops.url") && err.contains("allow_private_network"),
        "{err}"
    );
}

/// A provider entry that cannot work (its secret forgotten) is the error,
/// found before the database is created or migrated.
#[tokio::test]
async fn serve_refuses_a_provider_without_its_secret_before_touching_the_database() {
    let database = format!("never_created_{}", uuid::Uuid::new_v4().simple());
    let table: toml::Table = format!(
        r#"
        public_url = "https://connect.example.com"
        database_url = "{}/{database}"
        keys = ["k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="]
        [auth]
        issuer = "https://idp.example.com"
        web_client_id = "web"
        [providers.github]
        client_id = "a"
        "#,
        crate::helpers::server_url()
    )
    .parse()
    .unwrap();
    let settings = Settings::from_sources(None, Vec::new(), table).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let err = match Application::build_with_listener(settings, listener, None).await {
        Ok(_) => panic!("started without a client secret"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("client_secret"), "{err}");
    let mut admin =
        sqlx::PgConnection::connect(&format!("{}/postgres", crate::helpers::server_url()))
            .await
            .unwrap();
    let created: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(&database)
            .fetch_one(&mut admin)
            .await
            .unwrap();
    assert!(!created, "the database was created before the refusal");
}

/// A port someone else listens on is named with the setting that chose it.
#[tokio::test]
async fn a_busy_port_is_named_with_its_setting() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap();
    let db_name = format!("mcp_connect_test_{}", uuid::Uuid::new_v4().simple());
    let prepared = crate::helpers::prepare(&crate::helpers::server_url(), &db_name, None, |t| {
        t.insert("bind".into(), address.to_string().into());
    })
    .await;
    let err = match Application::build(prepared.settings).await {
        Ok(_) => panic!("listened on a port that was taken"),
        Err(e) => e.to_string(),
    };
    crate::helpers::drop_database(&db_name).await;
    assert!(
        err.contains(&address.to_string())
            && err.contains("`bind`")
            && err.contains("MCP_CONNECT_BIND"),
        "{err}"
    );
}

#[tokio::test]
async fn readyz_waits_for_the_issuers_metadata() {
    // Nothing listens on port 9 of loopback: the issuer cannot be reached.
    let app = spawn_app_with_issuer("http://127.0.0.1:9/").await;
    let r = app
        .http
        .get(format!("{}/readyz", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["status"], "identity provider unreachable", "{body}");
    // Liveness does not depend on it.
    let r = app
        .http
        .get(format!("{}/healthz", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn an_identity_provider_slower_than_the_readiness_wait_still_gets_the_instance_ready() {
    // Its metadata takes 5 s, past the 2 s a probe waits for it.
    let bound = provider_fakes::server::bind();
    let issuer = bound.base.clone();
    let metadata = json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/auth"),
        "token_endpoint": format!("{issuer}/token"),
        "jwks_uri": format!("{issuer}/jwks"),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
    });
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let _idp = bound.serve(move |routes| {
        let (metadata, counter) = (metadata.clone(), counter.clone());
        routes
            .route(
                "/.well-known/openid-configuration",
                web::get().to(move || {
                    counter.fetch_add(1, Ordering::SeqCst);
                    let metadata = metadata.clone();
                    async move {
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        HttpResponse::Ok().json(metadata)
                    }
                }),
            )
            .route(
                "/jwks",
                web::get().to(|| async { HttpResponse::Ok().json(json!({"keys": []})) }),
            );
    });
    let app = spawn_app_with_issuer(&issuer).await;
    assert_eq!(
        readyz(&app).await,
        503,
        "not ready before the metadata came"
    );
    // The discovery the first probe started goes on after it stopped
    // waiting (one started anew by every probe would never finish), and
    // the probes that come meanwhile wait for it rather than ask again.
    let deadline = Instant::now() + Duration::from_secs(30);
    while readyz(&app).await != 200 {
        assert!(Instant::now() < deadline, "never ready");
    }
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "one discovery, however many probes"
    );
}

#[tokio::test]
async fn probes_while_the_identity_provider_hangs_share_one_discovery() {
    // Every discovery hangs 3 s, then fails.
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let idp = provider_fakes::server::start(move |routes| {
        let counter = counter.clone();
        routes.route(
            "/.well-known/openid-configuration",
            web::get().to(move || {
                counter.fetch_add(1, Ordering::SeqCst);
                async {
                    tokio::time::sleep(Duration::from_secs(3)).await;
                    HttpResponse::ServiceUnavailable().finish()
                }
            }),
        );
    });
    let app = spawn_app_with_issuer(&idp.base).await;
    let answers = tokio::join!(readyz(&app), readyz(&app), readyz(&app), readyz(&app));
    let answers = [answers.0, answers.1, answers.2, answers.3].map(|s| s.as_u16());
    assert_eq!(answers, [503; 4]);
    // Had each probe started a discovery of its own, they would follow
    // one another to the identity provider long after the probes ended.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "one discovery for four probes"
    );
}

/// A test app whose authorization server (and web sign-in's identity
/// provider) is `issuer`.
async fn spawn_app_with_issuer(issuer: &str) -> TestApp {
    spawn_app_with(|t| {
        t["auth"]
            .as_table_mut()
            .unwrap()
            .insert("issuer".into(), issuer.into());
    })
    .await
}

/// What `/readyz` answers now.
async fn readyz(app: &TestApp) -> reqwest::StatusCode {
    app.http
        .get(format!("{}/readyz", app.base))
        .send()
        .await
        .unwrap()
        .status()
}
