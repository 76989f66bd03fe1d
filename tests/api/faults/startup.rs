//! Start-up while Postgres is away: retried with backoff for
//! `database.startup_timeout`, each attempt logged. And start-up on a
//! server that lets the service's role connect to its own database only.

use std::time::{Duration, Instant};

use mcp_connect::{db, startup::Application};

use super::OwnPostgres;
use crate::helpers::{prepare, started};

fn with_startup_timeout(secs: i64) -> impl FnOnce(&mut toml::Table) {
    move |t| {
        let mut database = toml::Table::new();
        database.insert("startup_timeout_secs".into(), secs.into());
        t.insert("database".into(), toml::Value::Table(database));
    }
}

#[tokio::test]
async fn start_up_waits_for_a_database_that_comes_back() {
    let pg = OwnPostgres::start(&[]);
    let db_name = format!("mcp_connect_test_{}", uuid::Uuid::new_v4().simple());
    let p = prepare(&pg.url(), &db_name, None, with_startup_timeout(60)).await;
    p.pool.close().await;
    pg.down();
    let (settings, listener, dev) = (p.settings, p.listener, Some(p.dev.routes()));
    let building = tokio::spawn(Application::build_with_listener(settings, listener, dev));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!building.is_finished(), "start-up gave up at once");
    pg.up();
    let app = tokio::time::timeout(Duration::from_secs(30), building)
        .await
        .expect("started once the database was back")
        .unwrap()
        .expect("built");
    let app = started(app, p.dev, p.pool, p.base, p.port, db_name, &pg.url(), true);
    let ready = app
        .http
        .get(format!("{}/readyz", app.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    assert!(
        crate::logs::captured()
            .lines()
            .any(|l| l.contains("database not reachable yet") && l.contains("attempt")),
        "each attempt is logged"
    );
}

#[tokio::test]
async fn start_up_gives_up_after_the_startup_timeout() {
    let pg = OwnPostgres::start(&[]);
    let db_name = format!("mcp_connect_test_{}", uuid::Uuid::new_v4().simple());
    let p = prepare(&pg.url(), &db_name, None, with_startup_timeout(3)).await;
    p.pool.close().await;
    pg.down();
    let started_at = Instant::now();
    let built = Application::build_with_listener(p.settings, p.listener, None).await;
    let took = started_at.elapsed();
    assert!(built.is_err());
    assert!(took >= Duration::from_secs(2), "{took:?}");
    assert!(took < Duration::from_secs(15), "{took:?}");
}

/// A "database" that accepts connections and never answers: a frozen
/// Postgres, or a port something else holds. Held open until dropped.
struct Silent {
    port: u16,
    _accepting: std::thread::JoinHandle<()>,
}

impl Silent {
    fn start() -> Silent {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepting = std::thread::spawn(move || {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept() {
                held.push(socket);
            }
        });
        Silent {
            port,
            _accepting: accepting,
        }
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/silent", self.port)
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits for `child` to exit, at most `limit`; kills it past that.
pub(super) fn exit_within(
    child: &mut std::process::Child,
    limit: Duration,
) -> Option<std::process::ExitStatus> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    None
}

/// Each attempt to reach the database gives up after the connect timeout,
/// so start-up ends after its own timeout even when the server never
/// answers; and the port opens only once the database is ready.
#[tokio::test]
async fn serve_gives_up_on_a_silent_database_opens_no_port_before_and_stops_when_told() {
    let silent = Silent::start();
    let port = free_port();
    let mut serve = serve_on(&silent, port, 4);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the port is open before the database is ready"
    );
    let status = exit_within(&mut serve, Duration::from_secs(20));
    let mut stderr = String::new();
    std::io::Read::read_to_string(serve.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    let status = status.unwrap_or_else(|| panic!("still starting after 20 s: {stderr}"));
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains("database not reachable"), "{stderr}");

    let mut migrate = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-connect"))
        .arg("migrate")
        .env("MCP_CONNECT_DATABASE_URL", silent.url())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = exit_within(&mut migrate, Duration::from_secs(20)).expect("migrate ended");
    assert!(!status.success());

    // A stop while it waits ends it at once (in a container, `docker
    // stop` signals this process).
    let mut serve = serve_on(&silent, free_port(), 60);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let term = std::process::Command::new("kill")
        .args(["-TERM", &serve.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let status = exit_within(&mut serve, Duration::from_secs(5)).expect("stopped at once");
    assert!(status.success(), "{status:?}");
}

/// `serve` against `silent`, listening on `port` once ready, giving up on
/// the database after `startup_timeout_secs`.
fn serve_on(silent: &Silent, port: u16, startup_timeout_secs: u32) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_mcp-connect"))
        .arg("serve")
        .env("MCP_CONNECT_PUBLIC_URL", "https://connect.example.com")
        .env("MCP_CONNECT_DATABASE_URL", silent.url())
        .env(
            "MCP_CONNECT_KEYS",
            "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        )
        .env("MCP_CONNECT_AUTH__ISSUER", "https://idp.example.com")
        .env("MCP_CONNECT_AUTH__WEB_CLIENT_ID", "mcp-connect-web")
        .env("MCP_CONNECT_AUTH__WEB_CLIENT_SECRET", "unused-here")
        .env("MCP_CONNECT_PROVIDERS__DEMO__CLIENT_ID", "mcp-connect-demo")
        .env("MCP_CONNECT_PROVIDERS__DEMO__CLIENT_SECRET", "unused-here")
        .env("MCP_CONNECT_BIND", format!("127.0.0.1:{port}"))
        .env(
            "MCP_CONNECT_DATABASE__STARTUP_TIMEOUT_SECS",
            startup_timeout_secs.to_string(),
        )
        .env("MCP_CONNECT_DATABASE__CONNECT_TIMEOUT_SECS", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// On `pg`, role `app`, which may connect to its own database and to no
/// other (`PUBLIC` loses `CONNECT` on `postgres`, as a hardened server's
/// `pg_hba.conf` or a PgBouncer listing one database would have it), and
/// its database `app_db` when `with_database`. Returns the URL of
/// `app_db` as `app`.
async fn confined_role(pg: &OwnPostgres, with_database: bool) -> String {
    use sqlx::Connection;
    let mut admin = sqlx::PgConnection::connect(&format!("{}/postgres", pg.url()))
        .await
        .unwrap();
    let mut statements = vec![
        "CREATE ROLE app LOGIN",
        "REVOKE CONNECT ON DATABASE postgres FROM PUBLIC",
    ];
    if with_database {
        statements.push("CREATE DATABASE app_db OWNER app");
    }
    for statement in statements {
        sqlx::query(statement).execute(&mut admin).await.unwrap();
    }
    format!("postgres://app@127.0.0.1:{}/app_db", pg.port)
}

/// `mcp-connect migrate` on `database_url`: whether it succeeded, and its
/// standard error.
fn migrate_with(database_url: &str) -> (bool, String) {
    migrate_with_env(database_url, &[])
}

/// [`migrate_with`], with more settings in the environment.
fn migrate_with_env(database_url: &str, env: &[(&str, &str)]) -> (bool, String) {
    let mut migrate = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-connect"))
        .arg("migrate")
        .env("MCP_CONNECT_DATABASE_URL", database_url)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = exit_within(&mut migrate, Duration::from_secs(30)).expect("migrate ended");
    let mut stderr = String::new();
    std::io::Read::read_to_string(migrate.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    (status.success(), stderr)
}

/// With `database_create_if_missing` on (the default), an existing
/// database is all start-up connects to: the `postgres` database is needed
/// only to create a missing one.
#[tokio::test]
async fn start_up_connects_to_no_other_database_than_an_existing_target() {
    let pg = OwnPostgres::start(&[]);
    let url = confined_role(&pg, true).await;
    let options = db::connect_options(&url.clone().into()).unwrap();
    let limit = Duration::from_secs(5);
    db::wait::prepare_database(&options, limit, limit, true)
        .await
        .expect("serve prepares its own database");
    let (migrated, stderr) = migrate_with(&url);
    assert!(migrated, "{stderr}");
}

/// A missing database that cannot be created for want of the `postgres`
/// database: the refusal says so and names the setting, instead of
/// "cannot reach Postgres".
#[tokio::test]
async fn a_missing_database_that_cannot_be_created_names_the_setting() {
    let pg = OwnPostgres::start(&[]);
    let url = confined_role(&pg, false).await;
    let (migrated, stderr) = migrate_with(&url);
    assert!(!migrated);
    assert!(
        stderr.contains("database_create_if_missing") && stderr.contains("does not exist"),
        "{stderr}"
    );
}

/// With `database_create_if_missing` off, a missing database is said as
/// such, and what to do about it: not "cannot reach Postgres".
#[test]
fn a_missing_database_not_to_be_created_is_named_as_missing() {
    let name = format!("mcp_connect_missing_{}", uuid::Uuid::new_v4().simple());
    let url = format!("{}/{name}", crate::helpers::server_url());
    let (migrated, stderr) =
        migrate_with_env(&url, &[("MCP_CONNECT_DATABASE_CREATE_IF_MISSING", "false")]);
    assert!(!migrated, "{stderr}");
    assert!(
        stderr.contains(&format!("database {name} does not exist"))
            && stderr.contains("(database_create_if_missing = true)")
            && !stderr.contains("cannot reach Postgres"),
        "{stderr}"
    );
}
