//! `spawn_app()`: a fresh database, the real application in dev mode (its
//! identity provider is the configured issuer), and typed helpers for MCP
//! calls. The database is dropped when the `TestApp` is.

use mcp_connect::domain::{ProviderName, UserRef};
use std::{net::TcpListener, time::Duration};

use mcp_connect::{
    config::Settings,
    db,
    dev::{self, DevServices},
    startup::{AppState, Application},
};
use reqwest::{RequestBuilder, Response};
use serde_json::{Value, json};
use sqlx::{Connection, PgConnection, PgPool};

pub const PROTOCOL: &str = "2026-07-28";
pub const CLIENT_ID: &str = "test-client";

pub struct TestApp {
    /// The public base URL (for a second instance: the first's).
    pub base: String,
    /// Where this instance really listens.
    pub addr: String,
    pub port: u16,
    pub db: PgPool,
    pub db_name: String,
    pub dev: DevServices,
    pub http: reqwest::Client,
    /// The application's own state, for tests that act as another part of
    /// the system (e.g. an OAuth callback on another instance).
    pub state: AppState,
    owns_db: bool,
    /// The Postgres server the database lives on.
    pub server: String,
    handle: actix_web::dev::ServerHandle,
}

pub fn server_url() -> String {
    std::env::var("TEST_DATABASE_SERVER")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned())
}

/// Drops database `name` on the test server, its connections ended, for a
/// test that made one outside a [`TestApp`] (or whose app's own clean-up
/// cannot reach the server).
pub async fn drop_database(name: &str) {
    let mut admin = PgConnection::connect(&format!("{}/postgres", server_url()))
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// Spawns the app; `tweak` may adjust the settings table before it is read.
pub async fn spawn_app_with(tweak: impl FnOnce(&mut toml::Table)) -> TestApp {
    let db_name = format!("mcp_connect_test_{}", uuid::Uuid::new_v4().simple());
    spawn_on(&server_url(), db_name, None, tweak).await
}

/// [`spawn_app_with`] on another Postgres server (`postgres://…:port`).
pub async fn spawn_app_on(server: &str, tweak: impl FnOnce(&mut toml::Table)) -> TestApp {
    let db_name = format!("mcp_connect_test_{}", uuid::Uuid::new_v4().simple());
    spawn_on(server, db_name, None, tweak).await
}

/// [`spawn_app_with`] on a database whose clock is `offset` ahead of this
/// process's (behind, when negative): an instance whose clock is off.
/// Every unqualified `now()` — the application's statements, the tests'
/// and the columns' defaults alike — finds `skew.now()` first, as the
/// database's `search_path` puts that schema before `pg_catalog` (which is
/// searched first only when the path leaves it out). Set before the
/// migrations run, so the defaults they create are bound to it too;
/// `public` stays first, where the tables are created.
pub async fn spawn_app_with_database_clock(
    offset: chrono::Duration,
    tweak: impl FnOnce(&mut toml::Table),
) -> TestApp {
    let db_name = format!("mcp_connect_test_{}", uuid::Uuid::new_v4().simple());
    let mut admin = PgConnection::connect(&format!("{}/postgres", server_url()))
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE DATABASE \"{db_name}\""
    )))
    .execute(&mut admin)
    .await
    .unwrap();
    let mut skewed = PgConnection::connect(&format!("{}/{db_name}", server_url()))
        .await
        .unwrap();
    let statements = [
        "CREATE SCHEMA skew".to_owned(),
        format!(
            "CREATE FUNCTION skew.now() RETURNS timestamptz LANGUAGE sql STABLE
             AS $$ SELECT pg_catalog.now() + make_interval(secs => {}) $$",
            offset.num_seconds()
        ),
        format!(
            "CREATE FUNCTION skew.statement_timestamp() RETURNS timestamptz LANGUAGE sql STABLE
             AS $$ SELECT pg_catalog.statement_timestamp() + make_interval(secs => {}) $$",
            offset.num_seconds()
        ),
        format!("ALTER DATABASE \"{db_name}\" SET search_path = public, skew, pg_catalog"),
    ];
    for statement in statements {
        sqlx::query(sqlx::AssertSqlSafe(statement))
            .execute(&mut skewed)
            .await
            .unwrap();
    }
    let app = spawn_on(&server_url(), db_name, None, tweak).await;
    // The path applies to sessions that start from now on: the app's and
    // this one.
    let seen: f64 =
        sqlx::query_scalar("SELECT extract(epoch FROM now() - pg_catalog.now())::float8")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(
        seen,
        offset.num_seconds() as f64,
        "the database's clock is set off"
    );
    app
}

impl TestApp {
    /// A second instance of the service behind the same public URL, on the
    /// same database and keys (a scaled-out deployment); it leaves the
    /// database to the first.
    pub async fn second_instance(&self) -> TestApp {
        self.second_instance_with(|_| {}).await
    }

    /// [`Self::second_instance`] with adjusted settings.
    pub async fn second_instance_with(&self, tweak: impl FnOnce(&mut toml::Table)) -> TestApp {
        spawn_on(
            &self.server.clone(),
            self.db_name.clone(),
            Some(self.base.clone()),
            tweak,
        )
        .await
    }
}

/// What a test application is built from, before it is built.
pub struct Prepared {
    pub settings: Settings,
    pub listener: TcpListener,
    pub dev: DevServices,
    pub pool: PgPool,
    pub base: String,
    pub port: u16,
}

/// Creates and migrates the database on `server`, the dev services and the
/// settings; `public`: the public base URL of another instance.
pub async fn prepare(
    server: &str,
    db_name: &str,
    public: Option<String>,
    tweak: impl FnOnce(&mut toml::Table),
) -> Prepared {
    crate::logs::init();
    let database_url = format!("{server}/{db_name}");
    let options = db::connect_options(&database_url.clone().into()).expect("database url");
    db::create_database_if_missing(&options, db::ANSWER_WITHIN)
        .await
        .expect("create test database");
    let pool = db::pool(options, 5);
    db::migrate(&pool, db::ANSWER_WITHIN)
        .await
        .expect("migrate");

    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let base = public.unwrap_or_else(|| format!("http://127.0.0.1:{port}"));
    let dev = DevServices::load_or_create(&pool, &base)
        .await
        .expect("dev services");
    let key = dev::dev_key_entry(&pool).await.expect("dev key");

    let mut table: toml::Table = toml::from_str(&format!(
        r#"
        public_url = "{base}"
        # Behind a load balancer every instance answers for the public host.
        allowed_hosts = ["127.0.0.1"]
        database_url = "{database_url}"
        keys = ["{key}"]
        insecure_http = true
        log_format = "pretty"
        [auth]
        issuer = "{issuer}"
        web_client_id = "mcp-connect-web"
        # The tests try revocations owed themselves (`retry_due`): the
        # background retrier keeps out of their way.
        [revocation]
        retry_every_secs = 3600
        "#,
        issuer = dev.issuer()
    ))
    .expect("settings table");
    let mut providers = toml::Table::new();
    providers.insert(
        "demo".into(),
        toml::Value::Table(dev.demo().provider_settings()),
    );
    table.insert("providers".into(), toml::Value::Table(providers));
    tweak(&mut table);
    let settings = Settings::from_sources(None, Vec::new(), table).expect("settings");
    Prepared {
        settings,
        listener,
        dev,
        pool,
        base,
        port,
    }
}

/// `public`: the public base URL when this is another instance of a
/// deployment (`None`: this instance's own address, and it owns the database).
async fn spawn_on(
    server: &str,
    db_name: String,
    public: Option<String>,
    tweak: impl FnOnce(&mut toml::Table),
) -> TestApp {
    let owns_db = public.is_none();
    let p = prepare(server, &db_name, public, tweak).await;
    let app = Application::build_with_listener(p.settings, p.listener, Some(p.dev.routes()))
        .await
        .expect("build app");
    started(app, p.dev, p.pool, p.base, p.port, db_name, server, owns_db)
}

/// The test's handle on a built application, which it starts serving.
#[allow(clippy::too_many_arguments)]
pub fn started(
    app: Application,
    dev: DevServices,
    pool: PgPool,
    base: String,
    port: u16,
    db_name: String,
    server: &str,
    owns_db: bool,
) -> TestApp {
    let state = app.state().clone();
    let handle = app.handle();
    tokio::spawn(app.run_until_stopped());

    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    TestApp {
        base,
        addr: format!("http://127.0.0.1:{port}"),
        port,
        db: pool,
        db_name,
        dev,
        http,
        state,
        owns_db,
        server: server.to_owned(),
        handle,
    }
}

impl TestApp {
    /// `subject`'s usable token for the demo provider, as the vault hands it
    /// to a tool; panics when there is none.
    pub async fn demo_token(&self, subject: &str) -> mcp_connect::connect::UsableToken {
        let demo = self.state.connect.provider("demo").expect("demo provider");
        match mcp_connect::connect::vault::usable_token(
            &self.state.connect,
            UserRef::new(&self.dev.issuer(), subject),
            demo,
            &[],
        )
        .await
        .expect("vault")
        {
            mcp_connect::connect::TokenState::Usable(token) => token,
            other => panic!("{subject} has no usable demo token: {other:?}"),
        }
    }

    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.addr)
    }

    /// A valid access token for `subject`, from the dev identity provider.
    pub fn token(&self, subject: &str) -> String {
        self.dev
            .mint_access_token(subject, CLIENT_ID, &["openid"], Duration::from_secs(600))
            .expect("mint token")
    }

    /// A valid access token for `subject` as issued to `client_id`.
    pub fn token_for(&self, client_id: &str, subject: &str) -> String {
        self.dev
            .mint_access_token(subject, client_id, &["openid"], Duration::from_secs(600))
            .expect("mint token")
    }

    /// [`Self::mcp`] from the MCP client `client_id`.
    pub async fn mcp_as(
        &self,
        client_id: &str,
        subject: &str,
        method: &str,
        params: Value,
    ) -> (u16, Value) {
        let body = request(method, params);
        let token = self.token_for(client_id, subject);
        read(
            self.mcp_request(Some(&token), &body)
                .send()
                .await
                .expect("send"),
        )
        .await
    }

    /// A POST to /mcp with the standard headers for `body`, as `subject`.
    pub fn mcp_request(&self, token: Option<&str>, body: &Value) -> RequestBuilder {
        let mut rb = self
            .http
            .post(self.mcp_url())
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .header("MCP-Protocol-Version", PROTOCOL);
        if let Some(method) = body["method"].as_str() {
            rb = rb.header("Mcp-Method", method);
        }
        if let Some(name) = body["params"]["name"]
            .as_str()
            .or(body["params"]["uri"].as_str())
        {
            rb = rb.header("Mcp-Name", name);
        }
        if let Some(token) = token {
            rb = rb.bearer_auth(token);
        }
        rb.json(body)
    }

    /// Sends a 2026-07-28 request as `subject` and returns status and body.
    pub async fn mcp(&self, subject: &str, method: &str, params: Value) -> (u16, Value) {
        let body = request(method, params);
        let response = self
            .mcp_request(Some(&self.token(subject)), &body)
            .send()
            .await
            .expect("send");
        read(response).await
    }

    /// A POST to /mcp as `subject` with the transport headers of
    /// `protocol` but no JSON-RPC specifics; the caller adds the body.
    pub fn raw_post(&self, subject: &str, protocol: &str) -> RequestBuilder {
        self.http
            .post(self.mcp_url())
            .bearer_auth(self.token(subject))
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .header("MCP-Protocol-Version", protocol)
    }

    /// A 2025-11-25 (legacy, no per-request `_meta`) tools/call.
    pub async fn legacy_call(&self, subject: &str, tool: &str, arguments: Value) -> (u16, Value) {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}});
        read(
            self.raw_post(subject, "2025-11-25")
                .json(&call)
                .send()
                .await
                .expect("send"),
        )
        .await
    }

    pub async fn call_tool(&self, subject: &str, name: &str, arguments: Value) -> (u16, Value) {
        self.mcp(
            subject,
            "tools/call",
            json!({ "name": name, "arguments": arguments }),
        )
        .await
    }
}

/// A JSON-RPC request with the 2026-07-28 per-request `_meta`.
pub fn request(method: &str, mut params: Value) -> Value {
    if !params.is_object() {
        params = json!({});
    }
    let meta = params
        .as_object_mut()
        .expect("object")
        .entry("_meta")
        .or_insert_with(|| json!({}));
    meta["io.modelcontextprotocol/protocolVersion"] = json!(PROTOCOL);
    meta["io.modelcontextprotocol/clientCapabilities"] =
        json!({ "elicitation": { "url": {}, "form": {} } });
    meta["io.modelcontextprotocol/clientInfo"] = json!({ "name": "tests", "version": "1" });
    json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params })
}

/// Status and JSON body (SSE answers are unwrapped to their last message).
pub async fn read(response: Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let is_sse = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let text = response.text().await.expect("body");
    if is_sse {
        let last = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .rfind(|l| !l.is_empty())
            .unwrap_or("null");
        return (status, serde_json::from_str(last).unwrap_or(Value::Null));
    }
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

impl TestApp {
    /// Stops the server as a SIGTERM would: in-flight requests drain.
    pub async fn shut_down(&self) {
        self.state.begin_shutdown();
        self.handle.stop(true).await;
    }

    /// Stops the server as a drain that ran out does: the requests under
    /// way are dropped with the workers that ran them.
    pub async fn stop_at_once(&self) {
        self.state.begin_shutdown();
        self.handle.stop(false).await;
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        let name = self.db_name.clone();
        let server = self.server.clone();
        // Sends the stop command; awaiting it would need this very runtime.
        drop(self.handle.stop(false));
        if !self.owns_db {
            return;
        }
        // Drop runs inside the test's runtime; do the async cleanup on a
        // thread of its own. FORCE ends the app's remaining connections.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            // Bounded: a fault test's own Postgres may be gone already.
            rt.block_on(async move {
                let drop_it = async {
                    if let Ok(mut conn) = PgConnection::connect(&format!("{server}/postgres")).await
                    {
                        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                            "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
                        )))
                        .execute(&mut conn)
                        .await;
                    }
                };
                let _ = tokio::time::timeout(Duration::from_secs(10), drop_it).await;
            });
        })
        .join();
    }
}

/// Stores a demo connection for `subject` as the OAuth callback would:
/// `access_token`, and a refresh token when one is given.
pub async fn store_demo_connection(
    service: &mcp_connect::connect::ConnectionService,
    issuer: &str,
    subject: &str,
    access_token: &str,
    refresh_token: Option<String>,
) {
    let user = UserRef::new(issuer, subject);
    store_connection_at(
        service,
        user,
        "demo",
        "profile",
        access_token,
        refresh_token,
    )
    .await;
}

/// Stores `user`'s connection to `provider` as the OAuth callback would:
/// `access_token` granting `scope` for an hour, and a refresh token when
/// one is given; the account is `id-<subject>`, `<subject>-at-<provider>`.
pub async fn store_connection_at(
    service: &mcp_connect::connect::ConnectionService,
    user: UserRef<'_>,
    provider: &str,
    scope: &str,
    access_token: &str,
    refresh_token: Option<String>,
) {
    use mcp_connect::{
        connect::vault::{NewConnection, store_connection},
        providers::{Account, TokenSet},
    };
    use secrecy::SecretString;
    let tokens = TokenSet {
        access_token: SecretString::from(access_token.to_owned()),
        received: std::time::Instant::now(),
        refresh_token: refresh_token.map(SecretString::from),
        expires_in: Some(Duration::from_secs(3600)),
        scopes: Some(vec![scope.to_owned()]),
        token_type: "Bearer".to_owned(),
    };
    let account = Account {
        id: format!("id-{}", user.subject()),
        label: format!("{}-at-{provider}", user.subject()),
    };
    store_connection(
        service,
        NewConnection {
            user,
            provider: &ProviderName::parse(provider).unwrap(),
            account: &account,
            tokens: &tokens,
            requested_scopes: &[scope.to_owned()],
            client_id: Some("test-client"),
        },
    )
    .await
    .expect("store connection");
}

/// Stores a demo connection for `subject` as the OAuth callback would,
/// with `access_token` and a refresh token made from it.
pub async fn connect_directly(
    service: &mcp_connect::connect::ConnectionService,
    issuer: &str,
    subject: &str,
    access_token: &str,
) {
    let refresh = Some(format!("{access_token}-refresh"));
    store_demo_connection(service, issuer, subject, access_token, refresh).await;
}

impl TestApp {
    /// [`connect_directly`] for `subject` at this app's dev issuer.
    pub async fn connect_directly(&self, subject: &str, access_token: &str) {
        connect_directly(
            &self.state.connect,
            &self.dev.issuer(),
            subject,
            access_token,
        )
        .await;
    }
}

impl TestApp {
    /// The `mcp-connect` binary as an operator runs a maintenance command
    /// (`tokens`, `purge`) against this app: its public URL, database and
    /// issuer, and the key ring `keys`.
    pub fn operator_command(&self, keys: &str) -> std::process::Command {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-connect"));
        command
            .env("MCP_CONNECT_PUBLIC_URL", &self.base)
            .env(
                "MCP_CONNECT_DATABASE_URL",
                format!("{}/{}", server_url(), self.db_name),
            )
            .env("MCP_CONNECT_KEYS", keys)
            .env("MCP_CONNECT_AUTH__ISSUER", self.dev.issuer());
        command
    }
}

/// A command's standard output, once it succeeded (its output in the
/// message when it did not).
pub fn succeeded(output: std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The one number a `SELECT count(*) …` (or similar) returns.
/// `n` copies of `subject`'s connection as other people's (`bulk-1` to
/// `bulk-n`, each its own account), written by the database itself (in
/// random order if `shuffled`), with `key_id` set to `key_id` where the
/// database's `random()` falls under `share_on_key` (0 for none): a
/// large deployment's table in seconds.
pub async fn copy_connection(
    app: &TestApp,
    subject: &str,
    n: i64,
    shuffled: bool,
    (key_id, share_on_key): (&str, f64),
) {
    sqlx::query(
        "INSERT INTO connections
         SELECT (jsonb_populate_record(c, jsonb_build_object(
                    'id', gen_random_uuid(), 'subject', 'bulk-' || g, 'account_id', 'bulk-' || g,
                    'key_id', CASE WHEN random() < $4 THEN $3 ELSE c.key_id END))).*
         FROM connections c, generate_series(1, $2) g WHERE c.subject = $1
         ORDER BY CASE WHEN $5 THEN random() ELSE g::float8 END",
    )
    .bind(subject)
    .bind(n)
    .bind(key_id)
    .bind(share_on_key)
    .bind(shuffled)
    .execute(&app.db)
    .await
    .expect("copies of a connection");
}

pub async fn count(app: &TestApp, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .fetch_one(&app.db)
        .await
        .unwrap()
}

/// Makes the database refuse `events` (`INSERT`, `UPDATE OR DELETE`, …) on
/// `table`, as a full disk or a broken constraint would: each such row
/// change fails. [`allow`] takes it back.
pub async fn refuse(db: &PgPool, table: &str, events: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE OR REPLACE FUNCTION refused_by_the_test() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
         CREATE TRIGGER refuse_{table} BEFORE {events} ON {table}
             FOR EACH ROW EXECUTE FUNCTION refused_by_the_test();"
    )))
    .execute(db)
    .await
    .unwrap();
}

/// Takes back what [`refuse`] made `table` refuse.
pub async fn allow(db: &PgPool, table: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP TRIGGER refuse_{table} ON {table}"
    )))
    .execute(db)
    .await
    .unwrap();
}

/// The plan of a statement as the application prepared it on `conn` (the
/// one whose text is `LIKE` `shape`), for `arguments` (SQL literals, in
/// order): what Postgres does for it, not for a copy of its text.
pub async fn plan_of_prepared(conn: &mut PgConnection, shape: &str, arguments: &str) -> String {
    let name: String = sqlx::query_scalar(
        "SELECT name FROM pg_prepared_statements \
         WHERE statement LIKE $1 AND statement NOT LIKE '%pg_prepared_statements%'",
    )
    .bind(shape)
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN EXECUTE {name}({arguments})"
    )))
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    plan.join("\n")
}

/// Waits (at most 10 s) until at least `waiting` backends of `app`'s
/// database wait for a lock another one holds.
pub async fn until_blocked(app: &TestApp, waiting: i64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let blocked: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND cardinality(pg_blocking_pids(pid)) > 0",
        )
        .fetch_one(&app.db)
        .await
        .unwrap();
        if blocked >= waiting {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "nothing waited for the lock"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
