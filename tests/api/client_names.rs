//! How a client is named on the approval page: an operator's name, the
//! `client_name` and `client_uri` host of a Client ID Metadata Document,
//! or the bare id when the document is too large, too slow, not JSON, or
//! on an address that may not be fetched — and the page works either way.

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

/// A document host: `/good`, `/large`, `/slow`, `/html`. Counts requests.
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
        "/large" => HttpResponse::Ok().json(json!({
            "client_id": own, "client_name": "Large Assistant",
            "padding": "x".repeat(10_000),
        })),
        "/slow" => {
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
        (good.clone(), "Example Assistant", Some("assistant.example")),
        ("named-client".to_owned(), "Team Assistant", None),
        (format!("{}/large", trusted.base), "/large", None),
        (format!("{}/slow", trusted.base), "/slow", None),
        (format!("{}/html", trusted.base), "/html", None),
        // Loopback, and not trusted: never fetched.
        (format!("{}/good", untrusted.base), "/good", None),
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
