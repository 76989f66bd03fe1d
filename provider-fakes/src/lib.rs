//! Local fakes of the third-party providers, for mcp-connect's unit and
//! integration tests, so that no test needs the internet. Every fake is a
//! real HTTP server on 127.0.0.1:0 (`server`).
//!
//! GitHub, Google, Slack, Notion and Dropbox (`github`, `google`, `slack`,
//! `notion`, `dropbox`): each serves the paths its catalog entry calls, with the provider's documented quirks (see each
//! module). Codes and tokens are random and single-use where the real ones
//! are. `key_providers`: Datadog- and Twilio-like providers connected with a
//! credential; `hostile`: an API that reflects the secrets it was sent;
//! `scripted`: one server with fixed answers (the demo provider, a strict
//! RFC 6749 server, Atlassian's sites). Every fake records the requests it
//! receives (`seen`), and unit tests can mint codes and grants without a
//! browser (`issue_code`, `issue_grant`). `ports` chooses the ports of
//! servers that run in processes of their own.
//!
//! ```ignore
//! let github = provider_fakes::github::start().await;
//! let app = spawn_app_with(|table| github.configure(table, "github")).await;
//! // … the browser is sent to github's authorize URL:
//! let callback = github.visit(&authorize_url).await; // → the app's callback URL
//! assert_eq!(github.calls().token, 1);
//! ```
//!
//! Authorization is automatic (no page); `deny_next()` makes the next one
//! answer `access_denied`. Redirect URIs must be loopback URLs: the real
//! providers match a registered callback, which a test cannot know before
//! the app has bound its port.

// A test double: a broken fixture should stop the test at once, loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod atlassian;
pub mod dropbox;
pub mod github;
pub mod google;
pub mod hostile;
pub mod key_providers;
pub mod microsoft;
pub mod notion;
pub mod ports;
pub mod salesforce;
pub mod scripted;
pub mod server;
pub mod slack;
pub mod strava;

mod code_grant;
mod github_applications;
mod http;
mod recording;
mod scripted_routes;
mod state;

use std::{collections::BTreeMap, time::Duration};

use actix_web::web;

pub use recording::Seen;
use state::Shared;
pub use state::{Account, Calls};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Github,
    Google,
    Slack,
    Notion,
    Dropbox,
    Microsoft,
    Salesforce,
    Atlassian,
    Strava,
}

/// A running fake. Stopped when dropped.
pub struct FakeProvider {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    pub kind: Kind,
    shared: web::Data<Shared>,
    _server: server::Server,
}

async fn serve(kind: Kind, shared: Shared, routes: fn(&mut web::ServiceConfig)) -> FakeProvider {
    let shared = web::Data::new(shared);
    let data = shared.clone();
    let server = server::start(move |cfg| {
        cfg.app_data(data.clone());
        routes(cfg);
    });
    FakeProvider {
        base: server.base.clone(),
        kind,
        shared,
        _server: server,
    }
}

impl FakeProvider {
    pub fn client_id(&self) -> &str {
        &self.shared.client_id
    }

    /// Random per fake, so a test can look for it where it must not be.
    pub fn client_secret(&self) -> &str {
        &self.shared.client_secret
    }

    pub fn calls(&self) -> Calls {
        self.shared.calls.snapshot()
    }

    /// The HTTP status this fake answers a refresh grant at `token_path`
    /// (client credentials in the body): a test's way to ask whether a
    /// refresh token still works upstream.
    pub async fn refresh_status(
        &self,
        token_path: &str,
        refresh_token: &str,
    ) -> reqwest::Result<u16> {
        let answer = no_redirects()
            .post(format!("{}{token_path}", self.base))
            .form(&[
                ("grant_type", "refresh_token"),
                ("refresh_token", refresh_token),
                ("client_id", self.client_id()),
                ("client_secret", self.client_secret()),
            ])
            .send()
            .await?;
        Ok(answer.status().as_u16())
    }

    /// The HTTP status this fake answers a GET of `path` with `token` as
    /// bearer (and a User-Agent, which GitHub requires): a test's way to
    /// ask whether an access token still works upstream.
    pub async fn bearer_status(&self, path: &str, token: &str) -> reqwest::Result<u16> {
        let answer = no_redirects()
            .get(format!("{}{path}", self.base))
            .bearer_auth(token)
            .header("user-agent", "a-test")
            .send()
            .await?;
        Ok(answer.status().as_u16())
    }

    /// The next authorize request answers `error=access_denied`, as when
    /// the person presses Cancel.
    pub fn deny_next(&self) {
        self.shared.memory().deny_next = true;
    }

    /// Strava, Google: the person unticks every scope but those of
    /// `scope` (comma or space separated) on the consent page; what the
    /// provider answers says so. Google's sign-in scopes cannot be
    /// unticked.
    pub fn tick_only(&self, scope: &str) {
        self.shared.memory().ticked = Some(scope.to_owned());
    }

    /// From now on every request is answered with `status` and nothing
    /// else (`None`: served again).
    pub fn fail_with(&self, status: Option<u16>) {
        self.shared.memory().fail_with = status;
    }

    /// From now on every request to `path` (its revocation endpoint, say)
    /// is answered with `status` and nothing else (`None`: served again).
    pub fn fail_at(&self, path: &str, status: Option<u16>) {
        let mut memory = self.shared.memory();
        match status {
            Some(status) => memory.fail_at.insert(path.to_owned(), status),
            None => memory.fail_at.remove(path),
        };
    }

    /// While `on`, every request waits unanswered; set back to `false`,
    /// those held are answered 504, never served (their client may be
    /// gone, and must not have had them done).
    pub fn stall(&self, on: bool) {
        self.shared.memory().stalled = on;
    }

    /// How many requests `stall` holds right now (a test's way to know that
    /// a call has reached the provider and waits for its answer).
    pub fn held(&self) -> usize {
        self.shared.memory().held
    }

    /// The next `count` requests, whatever they are, answer `status`; the
    /// ones after are served again.
    pub fn fail_next(&self, count: usize, status: u16) {
        self.shared.memory().fail_next = Some((count, status));
    }

    /// The account approving the next authorize requests (tokens issued
    /// before keep theirs).
    pub fn set_account(&self, id: &str, login: &str) {
        self.shared.memory().account = Account {
            id: id.to_owned(),
            login: login.to_owned(),
        };
    }

    /// The parameters of the last authorize request (`access_type`,
    /// `prompt`, `user_scope`, `code_challenge`, …).
    pub fn last_authorize(&self) -> Option<BTreeMap<String, String>> {
        self.shared.memory().last_authorize.clone()
    }

    /// Lifetime of access tokens issued from now on; Google and Dropbox
    /// answer it as `expires_in`. `None`: they never expire (GitHub's,
    /// Slack's, Notion's).
    pub fn set_access_ttl(&self, ttl: Option<Duration>) {
        self.shared.memory().access_ttl = ttl;
    }

    /// Every access token issued so far stops working, as after expiry.
    pub fn expire_access_tokens(&self) {
        self.shared.memory().expire_access_tokens();
    }

    /// Requests seen on `path`, oldest first.
    pub fn seen(&self, path: &str) -> Vec<Seen> {
        let seen = self.shared.seen.lock().unwrap();
        seen.iter().filter(|s| s.path == path).cloned().collect()
    }

    /// Issues a code as if the account had approved an authorize request
    /// with `params` (its `redirect_uri`, `scope`, …), for tests that call
    /// the token endpoint without a browser.
    pub fn issue_code(&self, params: &[(&str, &str)]) -> String {
        let mut request: BTreeMap<String, String> = params
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        request.insert("client_id".into(), self.client_id().to_owned());
        let code = state::random("")[..20].to_owned();
        self.shared
            .memory()
            .authorize(request, code)
            .expect("the next authorize request was set to be denied")
    }

    /// A live grant of `scope` for the current account, as after consent:
    /// its access token, and a refresh token when `refresh`.
    pub fn issue_grant(&self, scope: &str, refresh: bool) -> (String, Option<String>) {
        let (access_prefix, refresh_prefix) = match self.kind {
            Kind::Github => ("gho_", "ghr_"),
            Kind::Google => ("ya29.", "1//0"),
            Kind::Slack => ("xoxp-1-", "xoxe-1-"),
            Kind::Notion => ("ntn_", "nrt_"),
            Kind::Dropbox => ("sl.", ""),
            Kind::Microsoft | Kind::Salesforce | Kind::Atlassian | Kind::Strava => ("", ""),
        };
        let mut memory = self.shared.memory();
        let account = memory.account.clone();
        let grant = memory.new_grant();
        let access = memory.issue_access(grant, &account, scope, access_prefix);
        let refresh = refresh.then(|| memory.issue_refresh(grant, &account, scope, refresh_prefix));
        (access, refresh)
    }

    /// Every code and token this fake has handed out, oldest first.
    pub fn issued(&self) -> Vec<String> {
        self.shared.memory().issued()
    }

    /// GitHub only: token answers form-encoded even when JSON was asked for.
    pub fn answer_form_encoded(&self, on: bool) {
        self.shared.memory().form_answers = on;
    }

    /// Every code and token this fake has handed out, plus its client
    /// secret: values that must never appear in a result, page, log or in
    /// clear in the database.
    pub fn secrets(&self) -> Vec<String> {
        let mut all = self.shared.memory().issued();
        all.push(self.shared.client_secret.clone());
        all
    }

    /// Plays the browser at the authorize URL the app built: returns where
    /// the fake redirected (the app's callback, with `code` or `error`).
    pub async fn visit(&self, authorize_url: &str) -> url::Url {
        assert!(
            authorize_url.starts_with(&self.base),
            "{authorize_url} is not this fake's"
        );
        let response = no_redirects().get(authorize_url).send().await.unwrap();
        assert_eq!(response.status(), 302, "the fake refused {authorize_url}");
        let location = response.headers()["location"].to_str().unwrap();
        url::Url::parse(location).unwrap()
    }

    /// API calls so far as `(Host header, path)`, oldest first.
    pub fn api_seen(&self) -> Vec<(String, String)> {
        self.shared.memory().api_seen.clone()
    }

    /// The paths of token endpoint requests so far, oldest first.
    pub fn token_paths(&self) -> Vec<String> {
        self.shared.memory().token_paths.clone()
    }

    /// Every refresh token issued so far, in order, live or not.
    pub fn refresh_tokens(&self) -> Vec<String> {
        self.shared.memory().refresh_issued.clone()
    }

    /// The `[providers.<name>]` table pointing the app at this fake.
    pub fn provider_table(&self) -> toml::Table {
        let b = &self.base;
        let (preset, authorize, token, userinfo, api, revocation) = match self.kind {
            Kind::Microsoft => return microsoft::table(self),
            Kind::Salesforce => return salesforce::table(self),
            Kind::Atlassian => return atlassian::table(self),
            Kind::Strava => return strava::table(self),
            Kind::Github => (
                "github",
                "/login/oauth/authorize",
                "/login/oauth/access_token",
                "/user",
                "/",
                Some("/applications/{client_id}/token"),
            ),
            Kind::Google => (
                "google",
                "/o/oauth2/v2/auth",
                "/token",
                "/v1/userinfo",
                "/",
                Some("/revoke"),
            ),
            Kind::Slack => (
                "slack",
                "/oauth/v2/authorize",
                "/api/oauth.v2.access",
                "/api/auth.test",
                "/api/",
                Some("/api/auth.revoke"),
            ),
            Kind::Notion => (
                "notion",
                "/v1/oauth/authorize",
                "/v1/oauth/token",
                "/v1/users/me",
                "/v1/",
                Some("/v1/oauth/revoke"),
            ),
            Kind::Dropbox => (
                "dropbox",
                "/oauth2/authorize",
                "/oauth2/token",
                "/2/users/get_current_account",
                "/2/",
                Some("/2/auth/token/revoke"),
            ),
        };
        let mut table = toml::Table::new();
        table.insert("preset".into(), preset.into());
        table.insert("client_id".into(), self.client_id().into());
        table.insert("client_secret".into(), self.client_secret().into());
        table.insert("authorize_url".into(), format!("{b}{authorize}").into());
        table.insert("token_url".into(), format!("{b}{token}").into());
        table.insert("userinfo_url".into(), format!("{b}{userinfo}").into());
        table.insert("api_base_url".into(), format!("{b}{api}").into());
        if let Some(path) = revocation {
            table.insert("revocation_url".into(), format!("{b}{path}").into());
        }
        table
    }

    /// Adds `[providers.<name>]` to the app's settings table (for
    /// `spawn_app_with`), keeping providers already there.
    pub fn configure(&self, table: &mut toml::Table, name: &str) {
        let providers = table
            .entry("providers")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let toml::Value::Table(providers) = providers {
            providers.insert(name.to_owned(), self.provider_table().into());
        }
    }

    /// The same as TOML text, `[providers.<name>]` included.
    pub fn settings_toml(&self, name: &str) -> String {
        let mut table = toml::Table::new();
        self.configure(&mut table, name);
        toml::to_string(&table).unwrap()
    }
}

/// An HTTP client like a test browser: no redirects followed, no proxy.
pub fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .unwrap()
}
