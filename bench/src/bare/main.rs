//! `bench-bare`: the ceiling mcp-connect is measured against. The same actix
//! ⇄ rmcp bridge shape as `src/mcp/bridge.rs` and the same rmcp Streamable
//! HTTP service configuration (stateless, JSON responses), serving a tool
//! with mcp-connect's semantics but no database, no encryption and no token
//! verification: whatever mcp-connect spends beyond this is its own work.
//!
//! `bench-bare --port 0` prints one JSON line `{"url": …}` once listening.
//! `POST /bench/connected {"sub", "provider"}` marks a user connected (the
//! harness's stand-in for the browser flow). `--database URL` keeps that in
//! Postgres with mcp-connect's own queries (see `store`): "bare rmcp + SQL".
//! `--upstream URL` (with `--database`): `whoami` on a connected user GETs
//! that URL with the stored token, as mcp-connect asks its provider who the
//! account is — the floor of S4, without unsealing or refreshing.
//! `--required --issuer URL --audience URL`: the floor plus the work
//! mcp-connect may not leave out (see `required`).

mod bridge;
mod required;
mod store;
mod tool;

use std::{io::Write, net::TcpListener, sync::Arc};

use actix_web::{App, HttpResponse, HttpServer, web};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::never::NeverSessionManager,
};
use store::Store;

/// The allocator mcp-connect's binary uses, so that the floor differs from
/// it only by the work it leaves out.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub struct Endpoint {
    service: StreamableHttpService<tool::BareServer, NeverSessionManager>,
    required: Option<Arc<required::Required>>,
}

#[derive(serde::Deserialize)]
struct MarkConnected {
    sub: String,
    provider: String,
    /// An upstream access token for the S4 floor.
    token: Option<String>,
}

async fn mark_connected(store: web::Data<Store>, body: web::Json<MarkConnected>) -> HttpResponse {
    let body = body.into_inner();
    match store
        .mark_connected(body.sub, body.provider, body.token)
        .await
    {
        Ok(()) => HttpResponse::Ok().json(serde_json::json!({"ok": true})),
        Err(e) => HttpResponse::InternalServerError().body(e.to_string()),
    }
}

/// The value after `flag`, if given.
fn arg(flag: &str) -> anyhow::Result<Option<String>> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == flag) {
        Some(i) => Ok(Some(
            args.get(i + 1)
                .ok_or_else(|| anyhow::anyhow!("{flag} needs a value"))?
                .clone(),
        )),
        None => Ok(None),
    }
}

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    let port = arg("--port")?.map(|p| p.parse()).transpose()?.unwrap_or(0);
    let listener = TcpListener::bind(("127.0.0.1", port))?;
    let port = listener.local_addr()?.port();
    let base = format!("http://127.0.0.1:{port}");
    let required = match std::env::args().any(|a| a == "--required") {
        true => {
            let (Some(issuer), Some(audience)) = (arg("--issuer")?, arg("--audience")?) else {
                anyhow::bail!("--required needs --issuer and --audience");
            };
            Some(Arc::new(required::Required::new(&issuer, &audience)?))
        }
        false => None,
    };
    // The access line goes where mcp-connect's goes: JSON on stderr,
    // queued for a writer thread.
    let _logs = required
        .is_some()
        .then(|| mcp_connect::telemetry::init_for_serving(mcp_connect::config::LogFormat::Json));
    let store = match arg("--database")? {
        Some(url) => Store::postgres(&url, required.clone()).await?,
        None => Store::Memory(Arc::default()),
    };
    let upstream = match arg("--upstream")? {
        Some(url) => Some(tool::Upstream {
            url,
            http: mcp_connect::providers::outbound_http_client()?,
        }),
        None => None,
    };
    let server = tool::BareServer::new(base.clone(), store.clone(), upstream, required.clone());
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_allowed_hosts(["127.0.0.1".to_owned()])
        .with_allowed_origins([base.clone()])
        .enforce_origin_validation()
        .with_max_request_body_bytes(1024 * 1024);
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    let endpoint = web::Data::new(Endpoint { service, required });
    let store = web::Data::new(store);
    let http = HttpServer::new(move || {
        App::new()
            .app_data(endpoint.clone())
            .app_data(store.clone())
            .service(web::resource("/mcp").route(web::route().to(bridge::handle)))
            .route("/bench/connected", web::post().to(mark_connected))
            .route(
                "/bench/health",
                web::get().to(|| async { HttpResponse::Ok().finish() }),
            )
    })
    .listen(listener)?
    .run();
    let line = serde_json::json!({ "url": base });
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()?;
    drop(out);
    http.await?;
    Ok(())
}
