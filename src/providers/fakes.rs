//! Test-only: one local HTTP server on 127.0.0.1:0 playing GitHub, Google,
//! Slack, the dev demo provider and a strict RFC 6749 server, each with its
//! documented quirks, and recording every request it receives. The routes
//! live in `fakes_routes`.

use std::{collections::HashMap, sync::Mutex};

use actix_web::{App, HttpRequest, HttpServer, dev::ServerHandle, web};

use super::ProviderCatalog;
use crate::config::Settings;

/// One request as the fake saw it.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub method: String,
    pub path: String,
    pub query: String,
    /// Lowercase names.
    pub headers: HashMap<String, String>,
    pub form: HashMap<String, String>,
    pub body: String,
}

#[derive(Default)]
pub(crate) struct FakeState {
    pub seen: Mutex<Vec<Seen>>,
}

pub(crate) struct Fake {
    base: String,
    state: web::Data<FakeState>,
    handle: ServerHandle,
}

impl Drop for Fake {
    fn drop(&mut self) {
        drop(self.handle.stop(false));
    }
}

impl Fake {
    pub(crate) async fn start() -> Fake {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let state = web::Data::new(FakeState::default());
        let data = state.clone();
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .default_service(web::to(record_and_serve))
        })
        .workers(1)
        .disable_signals()
        .listen(listener)
        .unwrap()
        .run();
        let handle = server.handle();
        actix_web::rt::spawn(server);
        Fake {
            base,
            state,
            handle,
        }
    }

    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    pub(crate) fn catalog(&self) -> ProviderCatalog {
        catalog_for(&self.base)
    }

    /// Requests seen on `path`, oldest first.
    pub(crate) fn seen(&self, path: &str) -> Vec<Seen> {
        let seen = self.state.seen.lock().unwrap();
        seen.iter().filter(|s| s.path == path).cloned().collect()
    }
}

async fn record_and_serve(
    req: HttpRequest,
    body: web::Bytes,
    state: web::Data<FakeState>,
) -> actix_web::HttpResponse {
    let text = String::from_utf8_lossy(&body).into_owned();
    let form: HashMap<String, String> = url::form_urlencoded::parse(&body).into_owned().collect();
    let seen = Seen {
        method: req.method().to_string(),
        path: req.path().to_owned(),
        query: req.query_string().to_owned(),
        headers: req
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
            .collect(),
        form,
        body: text,
    };
    state.seen.lock().unwrap().push(seen.clone());
    super::fakes_routes::serve(&seen)
}

pub(crate) fn http() -> reqwest::Client {
    crate::providers::outbound_http_client().unwrap()
}

/// Settings with this public URL and these `[providers.…]` tables.
pub(crate) fn settings_with(public_url: &str, providers_toml: &str) -> Settings {
    let base: toml::Table = format!(
        "public_url = \"{public_url}\"\n\
         database_url = \"postgres://localhost/unused\"\n\
         keys = [\"k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\"]\n\
         [auth]\nissuer = \"https://idp.example.com\"\n\
         {providers_toml}"
    )
    .parse()
    .unwrap();
    Settings::from_sources(None, Vec::new(), base).unwrap()
}

/// Every preset pointed at the fake on `base` (the demo preset needs no
/// URLs: it lives under the public URL, which is the fake's).
pub(crate) fn catalog_for(base: &str) -> ProviderCatalog {
    let b = base;
    let toml = format!(
        r#"
[providers.github]
client_id = "gh-client"
client_secret = "gh-secret"
authorize_url = "{b}/github/authorize"
token_url = "{b}/github/token"
userinfo_url = "{b}/github/user"
api_base_url = "{b}/github/api/"

[providers.ghform]
preset = "github"
client_id = "gh-client"
client_secret = "gh-secret"
authorize_url = "{b}/github/authorize"
token_url = "{b}/github/token-form-only"
userinfo_url = "{b}/github/user"
api_base_url = "{b}/github/api/"

[providers.google]
client_id = "g-client"
client_secret = "g-secret"
authorize_url = "{b}/google/auth"
token_url = "{b}/google/token"
revocation_url = "{b}/google/revoke"
userinfo_url = "{b}/google/userinfo"
api_base_url = "{b}/google/api/"

[providers.slack]
client_id = "s-client"
client_secret = "s-secret"
authorize_url = "{b}/slack/oauth/v2/authorize"
token_url = "{b}/slack/api/oauth.v2.access"
userinfo_url = "{b}/slack/api/auth.test"
api_base_url = "{b}/slack/api/"

[providers.demo]
client_id = "demo-client"
client_secret = "demo-secret"

[providers.rfc]
client_id = "my client"
client_secret = "s3cr:et%"
authorize_url = "{b}/rfc/authorize"
token_url = "{b}/rfc/token"
revocation_url = "{b}/rfc/revoke"
userinfo_url = "{b}/rfc/userinfo"
api_base_url = "{b}/rfc/api/v1"
max_response_bytes = 1000
allowed_methods = ["get", "delete"]
"#
    );
    ProviderCatalog::from_settings(&settings_with(base, &toml)).unwrap()
}
