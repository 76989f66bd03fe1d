//! How a client is named on the approval page: an operator's name, the
//! `client_name` of a Client ID Metadata Document with the host that
//! served it, or the bare id when the document is too large, too slow, not
//! JSON, on an address that may not be fetched, or the id is not a URL's
//! one spelling — and the page works either way.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use actix_web::{HttpRequest, HttpResponse, web};
use provider_fakes::server::{self, Server};
use serde_json::json;

use crate::{
    browser::Browser,
    full_flow::connect_demo,
    grants::{approval_page, asked, retry},
    helpers::spawn_app_with,
};

/// A document host: `/good`, `/late` (in a second), `/large`, `/slow` (and
/// `/slow<anything>`), `/html`. Counts requests.
struct DocumentHost {
    base: String,
    hits: Arc<AtomicUsize>,
    _server: Server,
}

fn start_documents() -> DocumentHost {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let server = server::start(move |cfg| {
        let counted = counted.clone();
        cfg.default_service(web::to(move |req: HttpRequest| {
            counted.fetch_add(1, Ordering::SeqCst);
            document(req)
        }));
    });
    DocumentHost {
        base: server.base.clone(),
        hits,
        _server: server,
    }
}

async fn document(req: HttpRequest) -> HttpResponse {
    let own = format!("http://{}{}", req.connection_info().host(), req.path());
    match req.path() {
        "/good" => HttpResponse::Ok().json(json!({
            "client_id": own, "client_name": "Example Assistant",
            "client_uri": "https://assistant.example/home",
            "redirect_uris": ["http://127.0.0.1/callback"],
        })),
        "/late" => {
            tokio::time::sleep(Duration::from_secs(1)).await;
            HttpResponse::Ok().json(json!({"client_id": own, "client_name": "Late Assistant"}))
        }
        "/large" => HttpResponse::Ok().json(json!({
            "client_id": own, "client_name": "Large Assistant",
            "padding": "x".repeat(10_000),
        })),
        slow if slow.starts_with("/slow") => {
            tokio::time::sleep(Duration::from_secs(8)).await;
            HttpResponse::Ok().json(json!({"client_id": own, "client_name": "Slow Assistant"}))
        }
        "/html" => HttpResponse::Ok()
            .content_type("text/html")
            .body("<html>Html Assistant</html>"),
        _ => HttpResponse::NotFound().finish(),
    }
}

#[tokio::test]
async fn clients_are_named_by_their_metadata_or_shown_by_id() {
    let trusted = start_documents();
    let untrusted = start_documents();
    let trusted_host = trusted.base.trim_start_matches("http://").to_owned();
    let app = spawn_app_with(|t| {
        let clients: toml::Table = toml::from_str(&format!(
            "metadata_trusted_hosts = [\"{trusted_host}\"]\n[names]\n\"named-client\" = \"Team Assistant\"\n"
        ))
        .unwrap();
        t.insert("clients".into(), toml::Value::Table(clients));
    })
    .await;
    connect_demo(&app, "alice", "octo").await;
    let browser = Browser::new(&app);

    let good = format!("{}/good", trusted.base);
    let cases = [
        // Named by the host that served the document, not by the
        // `client_uri` it claims (assistant.example).
        (
            good.clone(),
            "Example Assistant",
            Some("of <strong>127.0.0.1</strong>"),
        ),
        ("named-client".to_owned(), "Team Assistant", None),
        (format!("{}/large", trusted.base), "/large", None),
        (format!("{}/slow", trusted.base), "/slow", None),
        (format!("{}/html", trusted.base), "/html", None),
        // Loopback, and not trusted: never fetched.
        (format!("{}/good", untrusted.base), "/good", None),
        // Not a URL's one spelling (it would be fetched as `/good`): the
        // bare id, never fetched.
        (format!("{}/x/../good", trusted.base), "/x/../good", None),
    ];
    for (client, shown, host) in cases {
        let started = Instant::now();
        let (url, state, message) = asked(&app, &client).await;
        assert!(
            started.elapsed() < Duration::from_secs(6),
            "{client}: the ask waited {:?}",
            started.elapsed()
        );
        assert!(message.contains(shown), "{client}: {message}");
        let page = approval_page(&browser, &url).await;
        let heading = format!("{shown} wants to use your Demo account octo");
        let heading = if shown.starts_with('/') {
            // The bare id, whole.
            format!("{client} wants to use your Demo account octo")
        } else {
            heading
        };
        assert!(page.body.contains(&heading), "{client}: {}", page.body);
        if let Some(host) = host {
            assert!(page.body.contains(host), "{client}: {}", page.body);
        }
        assert!(
            !page.body.contains("assistant.example"),
            "{client}: {}",
            page.body
        );
        for name in ["Large Assistant", "Slow Assistant", "Html Assistant"] {
            assert!(!page.body.contains(name), "{client}: {}", page.body);
        }
        let done = browser
            .submit(&page, "/connect", &[("action", "continue")])
            .await;
        assert_eq!(done.status, 200, "{client}: {}", done.body);
        let body = retry(&app, &client, &state, "accept").await;
        assert_eq!(body["result"]["resultType"], "complete", "{client}: {body}");
    }
    assert_eq!(untrusted.hits.load(Ordering::SeqCst), 0, "never fetched");
    // Cached: each document was fetched once, for the ask, the page and
    // the notice together.
    assert_eq!(trusted.hits.load(Ordering::SeqCst), 4);
}

/// An app that fetches `documents`' documents (their host trusted), alice
/// connected to the demo provider with each of `clients` granted on it, and
/// a browser signed in as her.
async fn signed_in_with_grants(
    documents: &DocumentHost,
    clients: &[String],
) -> (crate::helpers::TestApp, Browser) {
    let host = documents.base.trim_start_matches("http://").to_owned();
    let app = spawn_app_with(|t| {
        let clients: toml::Table =
            toml::from_str(&format!("metadata_trusted_hosts = [\"{host}\"]\n")).unwrap();
        t.insert("clients".into(), toml::Value::Table(clients));
    })
    .await;
    connect_demo(&app, "alice", "octo").await;
    let connection: uuid::Uuid = sqlx::query_scalar("SELECT id FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    for client in clients {
        mcp_connect::db::client_grants::insert(&app.db, connection, client)
            .await
            .unwrap();
    }
    let browser = Browser::new(&app);
    let start = browser.get("/login?return_to=/connections").await;
    browser.sign_in_from(start, "alice").await;
    (app, browser)
}

/// The connections page names every client it lists, their documents
/// fetched together: three slow ones cost it one fetch's time limit (3 s),
/// not three.
#[tokio::test]
async fn the_connections_page_waits_for_slow_documents_once_not_once_each() {
    let documents = start_documents();
    let slow: Vec<String> = (1..=3)
        .map(|n| format!("{}/slow{n}", documents.base))
        .collect();
    let (_app, browser) = signed_in_with_grants(&documents, &slow).await;

    let started = Instant::now();
    let page = browser.get("/connections").await;
    let waited = started.elapsed();
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        waited < Duration::from_secs(8),
        "the page waited {waited:?} for three documents"
    );
    for client in &slow {
        assert!(
            page.body.contains(client.as_str()),
            "{client}: {}",
            page.body
        );
    }
    assert_eq!(
        documents.hits.load(Ordering::SeqCst),
        3,
        "each fetched once"
    );
}

/// Two pages that need the same uncached document while it is being
/// fetched wait for one fetch, and both name the client by it.
#[tokio::test]
async fn pages_that_need_one_document_at_once_share_its_fetch() {
    let documents = start_documents();
    let late = format!("{}/late", documents.base);
    let (_app, browser) = signed_in_with_grants(&documents, &[late]).await;

    let (first, second) = tokio::join!(browser.get("/connections"), browser.get("/connections"));
    for page in [&first, &second] {
        assert_eq!(page.status, 200, "{}", page.body);
        assert!(page.body.contains("Late Assistant"), "{}", page.body);
    }
    assert_eq!(documents.hits.load(Ordering::SeqCst), 1, "one fetch");
    // And from the cache after it.
    let again = browser.get("/connections").await;
    assert!(again.body.contains("Late Assistant"), "{}", again.body);
    assert_eq!(documents.hits.load(Ordering::SeqCst), 1, "still one fetch");
}
