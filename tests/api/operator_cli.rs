//! What an operator's deployment leans on, run as the real binary: several
//! instances starting at once on one fresh database, a database the service
//! must not create, migrations run with the database URL alone, and the
//! container health check.

use std::process::{Command, Output};

use sqlx::{Connection, PgConnection};

use crate::helpers::{server_url, spawn_app};

/// `mcp-connect <args>` configured only by the minimal environment.
fn run(database_url: &str, extra: &[(&str, &str)], args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_mcp-connect"))
        .args(args)
        .env_clear()
        .env("MCP_CONNECT_PUBLIC_URL", "https://connect.example.com")
        .env("MCP_CONNECT_DATABASE_URL", database_url)
        .env(
            "MCP_CONNECT_KEYS",
            "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        )
        .env("MCP_CONNECT_AUTH__ISSUER", "https://idp.example.com")
        .envs(extra.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn ok(output: &Output) -> bool {
    output.status.success()
}

async fn admin() -> PgConnection {
    PgConnection::connect(&format!("{}/postgres", server_url()))
        .await
        .unwrap()
}

async fn exists(name: &str) -> bool {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
        .bind(name)
        .fetch_one(&mut admin().await)
        .await
        .unwrap()
}

#[tokio::test]
async fn concurrent_start_of_two_instances_on_one_fresh_database_is_safe() {
    // A few rounds: the race is between creating the database and taking
    // the migration lock, so give it several chances.
    for _ in 0..3 {
        let name = format!("mcp_connect_test_{}", uuid::Uuid::new_v4().simple());
        let url = format!("{}/{name}", server_url());
        let starts: Vec<_> = (0..2).map(|_| run(&url, &[], &["migrate"])).collect();
        let outputs: Vec<Output> = starts
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        for output in &outputs {
            assert!(ok(output), "{}", String::from_utf8_lossy(&output.stderr));
        }
        let mut db = PgConnection::connect(&url).await.unwrap();
        let (applied, distinct, failed): (i64, i64, i64) = sqlx::query_as(
            "SELECT count(*), count(DISTINCT version), count(*) FILTER (WHERE NOT success) FROM _sqlx_migrations",
        )
        .fetch_one(&mut db)
        .await
        .unwrap();
        assert_eq!(applied, mcp_connect::db::MIGRATOR.iter().count() as i64);
        assert_eq!((applied, failed), (distinct, 0));
        drop(db);
        crate::helpers::drop_database(&name).await;
    }
}

#[tokio::test]
async fn concurrent_start_without_create_if_missing_leaves_the_database_to_the_operator() {
    let name = format!("mcp_connect_test_{}", uuid::Uuid::new_v4().simple());
    let url = format!("{}/{name}", server_url());
    let output = run(
        &url,
        &[("MCP_CONNECT_DATABASE_CREATE_IF_MISSING", "false")],
        &["migrate"],
    )
    .wait_with_output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!ok(&output), "{stderr}");
    assert!(stderr.contains("does not exist"), "{stderr}");
    assert!(!exists(&name).await, "the database was created");

    // Created beforehand, it is migrated.
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
        .execute(&mut admin().await)
        .await
        .unwrap();
    let output = run(
        &url,
        &[("MCP_CONNECT_DATABASE_CREATE_IF_MISSING", "false")],
        &["migrate"],
    )
    .wait_with_output()
    .unwrap();
    assert!(ok(&output), "{}", String::from_utf8_lossy(&output.stderr));
    crate::helpers::drop_database(&name).await;
}

#[tokio::test]
async fn migrate_needs_only_the_database_url() {
    let name = format!("mcp_connect_test_{}", uuid::Uuid::new_v4().simple());
    let url = format!("{}/{name}", server_url());
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-connect"))
        .arg("migrate")
        .env_clear()
        .env("MCP_CONNECT_DATABASE_URL", &url)
        .output()
        .unwrap();
    assert!(ok(&output), "{}", String::from_utf8_lossy(&output.stderr));
    let mut db = PgConnection::connect(&url).await.unwrap();
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations WHERE success")
        .fetch_one(&mut db)
        .await
        .unwrap();
    assert_eq!(applied, mcp_connect::db::MIGRATOR.iter().count() as i64);
    drop(db);
    crate::helpers::drop_database(&name).await;

    // Without it, the error says which variable to set, and only that one.
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-connect"))
        .arg("migrate")
        .env_clear()
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!ok(&output), "{stderr}");
    assert!(stderr.contains("MCP_CONNECT_DATABASE_URL"), "{stderr}");
    assert!(!stderr.contains("MCP_CONNECT_KEYS"), "{stderr}");
}

#[tokio::test]
async fn health_command_exits_0_for_a_ready_instance_and_1_otherwise() {
    let app = spawn_app().await;
    // Off the runtime's thread: the app answers on it.
    let health = |url: String| async move {
        tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_mcp-connect"))
                .args(["health", "--url", &url, "--timeout", "5"])
                // A proxy set for the provider calls is not the probe's:
                // nobody listens on port 1.
                .env("HTTP_PROXY", "http://127.0.0.1:1")
                .env("http_proxy", "http://127.0.0.1:1")
                .env("ALL_PROXY", "http://127.0.0.1:1")
                .output()
                .unwrap()
        })
        .await
        .unwrap()
    };
    let ready = health(format!("{}/readyz", app.addr)).await;
    assert!(ok(&ready), "{}", String::from_utf8_lossy(&ready.stderr));
    let missing = health(format!("{}/no-such-page", app.addr)).await;
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("HTTP 404"));
    // Not ready: the reason `/readyz` gave is in the health log.
    app.state.connect.begin_shutdown();
    let stopping = health(format!("{}/readyz", app.addr)).await;
    assert_eq!(stopping.status.code(), Some(1));
    let said = String::from_utf8_lossy(&stopping.stderr);
    assert!(said.contains("answered HTTP 503: stopping"), "{said}");
    drop(app);
    // Nobody listens on port 9 of loopback.
    let down = health("http://127.0.0.1:9/readyz".to_owned()).await;
    assert_eq!(down.status.code(), Some(1));
    // Why, not only that the request failed.
    let said = String::from_utf8_lossy(&down.stderr);
    assert!(said.contains("Connection refused"), "{said}");
}

/// Without `--url`, the check asks `/readyz` on the port `bind` sets, and
/// reads nothing else of the configuration (a secret file it cannot open
/// does not matter).
#[tokio::test]
async fn health_command_asks_where_bind_says() {
    let app = spawn_app().await;
    let bind = app.addr.trim_start_matches("http://").to_owned();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_mcp-connect"))
            .arg("health")
            .env("MCP_CONNECT_BIND", &bind)
            .env("MCP_CONNECT_KEYS_FILE", "/nonexistent/keys")
            .env_remove("MCP_CONNECT_CONFIG_FILE")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(ok(&output), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        stdout.contains(&format!("{}/readyz: 200", app.addr)),
        "{stdout}"
    );
}

/// The maintenance commands' connections have the service's statement and
/// lock timeouts: a purge waiting on a row a request holds gives up as the
/// service would.
#[tokio::test]
async fn maintenance_commands_connect_with_the_services_timeouts() {
    let app = spawn_app().await;
    let mut settings = (*app.state.settings).clone();
    settings.database.lock_timeout_ms = 1234;
    settings.database.statement_timeout_ms = 4321;
    let state = mcp_connect::startup::for_maintenance(settings)
        .await
        .unwrap();
    let (lock, statement): (String, String) = sqlx::query_as(
        "SELECT current_setting('lock_timeout'), current_setting('statement_timeout')",
    )
    .fetch_one(&state.db)
    .await
    .unwrap();
    assert_eq!((lock.as_str(), statement.as_str()), ("1234ms", "4321ms"));
}

/// `users show` prints what is kept about a person; `users remove` prints
/// it too and removes nothing without --yes (exiting 1, so that a script
/// does not take it for done), then removes with it.
#[tokio::test]
async fn users_remove_shows_what_would_go_and_removes_only_with_yes() {
    let app = spawn_app().await;
    let issuer = app.dev.issuer();
    for subject in ["alice", "bob"] {
        crate::helpers::store_demo_connection(&app.state.connect, &issuer, subject, "t-1", None)
            .await;
    }
    let url = format!("{}/{}", server_url(), app.db_name);
    let cli = |args: &[&str]| run(&url, &[], args).wait_with_output().unwrap();
    let out = |o: &Output| String::from_utf8_lossy(&o.stdout).into_owned();
    let err = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();
    let connections = || crate::helpers::count(&app, "SELECT count(*) FROM connections");

    let shown = cli(&["users", "show", "alice", "--issuer", &issuer]);
    assert!(ok(&shown), "{}", err(&shown));
    let text = out(&shown);
    assert!(text.contains(&format!("alice at {issuer}")), "{text}");
    assert!(
        text.contains("demo alice-at-demo (id-alice) active")
            && text.contains("clients: test-client"),
        "{text}"
    );
    assert!(!text.contains("t-1"), "never a token: {text}");

    let listed = cli(&["users", "list", "--issuer", &issuer]);
    assert!(ok(&listed), "{}", err(&listed));
    let lines: Vec<String> = out(&listed).lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 3, "a header and two people: {lines:?}");
    assert_eq!(lines[0], "subject\tconnections\tproviders\tlast used");
    assert_eq!(lines[1], "alice\t1\tdemo\tnever");
    assert!(lines[2].starts_with("bob\t1\tdemo\t"), "{lines:?}");
    let first = cli(&["users", "list", "--issuer", &issuer, "--limit", "1"]);
    assert_eq!(out(&first).lines().count(), 2);
    assert!(err(&first).contains("--after='alice'"), "{}", err(&first));
    let bad = cli(&["users", "list", "--provider", "Not A Name"]);
    assert!(!ok(&bad));
    assert!(err(&bad).contains("--provider"), "{}", err(&bad));

    let asked = cli(&["users", "remove", "alice", "--issuer", &issuer]);
    assert!(!ok(&asked));
    assert!(err(&asked).contains("add --yes"), "{}", err(&asked));
    assert!(out(&asked).contains("alice-at-demo"), "{}", out(&asked));
    assert_eq!(connections().await, 2, "nothing removed without --yes");

    let done = cli(&["users", "remove", "alice", "--issuer", &issuer, "--yes"]);
    assert!(ok(&done), "{}", err(&done));
    // This process has no demo provider configured: nothing to revoke with.
    assert!(
        out(&done).contains("removed: 1 connection(s) (0 revoked at the provider)"),
        "{}",
        out(&done)
    );
    assert!(
        out(&done).contains("not revoked at demo yet: this configuration does not name it"),
        "{}",
        out(&done)
    );
    assert_eq!(connections().await, 1, "bob's is left");
    // Owed all the same, for the instances that name the provider.
    let owed = crate::helpers::count(
        &app,
        "SELECT count(*) FROM pending_revocations WHERE subject = 'alice'",
    );
    assert_eq!(owed.await, 1);

    // A mistyped subject, or the person removed already: nothing to remove
    // is not a removal (a script must not read it as done), and no audit
    // row names someone who never was.
    for subject in ["alcie", "alice"] {
        let typo = cli(&["users", "remove", subject, "--issuer", &issuer, "--yes"]);
        assert!(!ok(&typo), "{}", out(&typo));
        assert!(
            err(&typo).contains("nothing was removed: no one is known by this subject"),
            "{}",
            err(&typo)
        );
    }
    let removals = "SELECT count(*) FROM audit_events WHERE kind = 'user_removed'";
    assert_eq!(crate::helpers::count(&app, removals).await, 1);

    // By default the person is looked for under auth.issuer as written;
    // an --issuer is spelt as stored (no `/` after a bare host).
    for args in [
        &["users", "show", "bob"][..],
        &[
            "users",
            "show",
            "bob",
            "--issuer",
            "https://idp.example.com/",
        ],
    ] {
        let elsewhere = cli(args);
        assert!(ok(&elsewhere), "{}", err(&elsewhere));
        let text = out(&elsewhere);
        assert!(text.contains("bob at https://idp.example.com\n"), "{text}");
        assert!(text.contains("nothing is kept about this person"), "{text}");
    }
    let bad = cli(&["users", "show", "bob", "--issuer", "not a url"]);
    assert!(!ok(&bad));
    assert!(
        err(&bad).contains("--issuer") && err(&bad).contains("not a URL"),
        "{}",
        err(&bad)
    );
}

/// The maintenance commands against a Postgres that refuses the
/// connection say why, at once, and where (never the password): not that
/// a pool timed out waiting.
#[test]
fn maintenance_commands_say_why_postgres_cannot_be_reached() {
    // Nobody listens on port 9 of loopback.
    let url = "postgres://ann:Secret-Pw-5@127.0.0.1:9/app";
    for args in [
        &["purge"][..],
        &["users", "list"][..],
        &["tokens", "rekey"][..],
    ] {
        let started = std::time::Instant::now();
        let output = run(url, &[], args).wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!ok(&output), "{args:?}");
        assert!(
            stderr.contains("cannot reach Postgres for database app on 127.0.0.1:9 (user ann)")
                && stderr.contains("Connection refused"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("pool timed out"), "{args:?}: {stderr}");
        assert!(!stderr.contains("Secret-Pw-5"), "{args:?}: {stderr}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(4),
            "{args:?}: waited {:?}",
            started.elapsed()
        );
    }
}

/// `users list --provider` for a provider few people have, on a large
/// table whose rows lie in no particular order: it finds the people from
/// the index and reads only their rows, where reading every row of every
/// person to keep those with the provider outlasted the statement time
/// limit.
#[tokio::test]
async fn users_list_by_a_rare_provider_reads_the_index_not_every_row() {
    const MANY: i64 = 300_000;
    let app = spawn_app().await;
    let issuer = app.dev.issuer();
    crate::helpers::store_demo_connection(&app.state.connect, &issuer, "alice", "t-1", None).await;
    crate::helpers::copy_connection(&app, "alice", MANY, true, ("", 0.0)).await;
    sqlx::query("VACUUM (ANALYZE) connections")
        .execute(&app.db)
        .await
        .unwrap();
    let url = format!("{}/{}", server_url(), app.db_name);
    let limited = [("MCP_CONNECT_DATABASE__STATEMENT_TIMEOUT_MS", "300")];
    let cli = |args: &[&str]| run(&url, &limited, args).wait_with_output().unwrap();

    // Nobody has it: found from an index, no row read.
    let none = cli(&["users", "list", "--issuer", &issuer, "--provider", "google"]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&none.stdout),
        String::from_utf8_lossy(&none.stderr),
    );
    assert!(ok(&none), "{stdout}{stderr}");
    assert_eq!(stdout.lines().count(), 1, "the header alone: {stdout}");
    assert!(stderr.contains("0 person(s)"), "{stderr}");
    // Everyone has it: a page, each person with their own rows.
    let page = cli(&[
        "users",
        "list",
        "--issuer",
        &issuer,
        "--provider",
        "demo",
        "--limit",
        "2",
    ]);
    let stdout = String::from_utf8_lossy(&page.stdout).into_owned();
    assert!(ok(&page), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[1], "alice\t1\tdemo\tnever");
    assert!(lines[2].starts_with("bulk-1\t1\tdemo\t"), "{lines:?}");
}
