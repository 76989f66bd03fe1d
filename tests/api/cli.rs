//! The command line, run as the real binary.

use std::process::Command;

use serde_json::json;

use crate::helpers::{request, server_url, spawn_app};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mcp-connect"))
}

#[tokio::test]
async fn dev_token_for_bob_yields_principal_bob() {
    let app = spawn_app().await;
    // Bob owns a connection; the token printed by the CLI must see it.
    sqlx::query(
        "INSERT INTO connections (id, issuer, subject, provider, account_id, account_label, access_token, key_id)
         VALUES ($1, $2, 'bob', 'demo', '7', 'bob-account', '\\x00', 'dev1')",
    )
    .bind(uuid::Uuid::new_v4())
    .bind(app.dev.issuer())
    .execute(&app.db)
    .await
    .unwrap();
    let output = bin()
        .args([
            "dev",
            "--database-url",
            &format!("{}/{}", server_url(), app.db_name),
        ])
        .args(["--port", &app.port.to_string(), "token", "--sub", "bob"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let token = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    assert_eq!(token.split('.').count(), 3, "one JWT on stdout: {token}");

    let body = request(
        "tools/call",
        json!({"name": "connections_list", "arguments": {}}),
    );
    let response = app.mcp_request(Some(&token), &body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    // Bob's one connection, and no one else's (which account it is, only
    // clients he approved for it are told).
    let listed = body["result"]["structuredContent"]["connections"]
        .as_array()
        .unwrap();
    assert_eq!(listed.len(), 1, "{body}");
    assert_eq!(listed[0]["provider"], "demo", "{body}");
}

#[test]
fn keys_generate_prints_a_usable_key_entry() {
    let output = bin()
        .args(["keys", "generate", "--id", "k9"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let entry = String::from_utf8(output.stdout).unwrap();
    let entry = entry.trim();
    assert!(entry.starts_with("k9:"), "{entry}");
    mcp_connect::crypto::KeyRing::from_entries([entry]).unwrap();
}

/// Two keys made on one day get two ids: the ring refuses an id twice,
/// and a rotation often makes its key the day the first was made.
#[test]
fn keys_generated_on_one_day_have_different_ids() {
    let id = || {
        let output = bin().args(["keys", "generate"]).output().unwrap();
        assert!(output.status.success());
        let entry = String::from_utf8(output.stdout).unwrap();
        entry.trim().split_once(':').unwrap().0.to_owned()
    };
    let (first, second) = (id(), id());
    assert_ne!(first, second);
    assert!(mcp_connect::crypto::is_key_id(&first), "{first}");
}

#[test]
fn serve_without_configuration_names_the_missing_setting() {
    let output = bin()
        .arg("serve")
        .env_remove("MCP_CONNECT_PUBLIC_URL")
        .env("MCP_CONNECT_DATABASE_URL", "postgres://localhost/none")
        .env(
            "MCP_CONNECT_KEYS",
            "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        )
        .env("MCP_CONNECT_AUTH__ISSUER", "https://idp.example")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("public_url") && stderr.contains("MCP_CONNECT_PUBLIC_URL"),
        "{stderr}"
    );
}

#[test]
fn serve_refuses_insecure_http_with_an_https_public_url() {
    let output = bin()
        .arg("serve")
        .env("MCP_CONNECT_PUBLIC_URL", "https://connect.example.com")
        .env("MCP_CONNECT_INSECURE_HTTP", "true")
        .env("MCP_CONNECT_DATABASE_URL", "postgres://localhost/none")
        .env(
            "MCP_CONNECT_KEYS",
            "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        )
        .env("MCP_CONNECT_AUTH__ISSUER", "https://idp.example")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("insecure_http"), "{stderr}");
}

/// `dev --help` and `dev token --help` offer only what dev does: not
/// `--config` (dev refuses it), nor a `--bind-host` (dev listens on
/// 127.0.0.1 only); `--port 0` is for the server, not for `dev token`;
/// `dev token` never creates the database.
#[test]
fn dev_help_offers_only_what_dev_does() {
    for args in [&["dev", "--help"][..], &["dev", "token", "--help"][..]] {
        let output = bin().args(args).output().unwrap();
        assert!(output.status.success(), "{args:?}");
        let help = String::from_utf8_lossy(&output.stdout);
        assert!(
            help.contains("--port") && help.contains("--database-url"),
            "{help}"
        );
        assert!(!help.contains("--config"), "{args:?}: {help}");
        assert!(
            !help.contains("MCP_CONNECT_CONFIG_FILE"),
            "{args:?}: {help}"
        );
        assert!(!help.contains("--bind-host"), "{args:?}: {help}");
        assert!(!help.contains("created and migrated if missing"), "{help}");
        assert!(help.contains("(not 0)"), "{args:?}: {help}");
    }
    let output = bin()
        .args(["dev", "--bind-host", "0.0.0.0", "--port", "0"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let output = bin().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(help.contains("--config"), "{help}");
    assert!(!help.contains("exits 0 when `--url`"), "{help}");
}

#[test]
fn dev_refuses_a_configuration_file_instead_of_ignoring_it() {
    for how in [
        bin()
            .args(["--config", "mine.toml", "dev", "--port", "0"])
            .output(),
        bin()
            .args(["dev", "--port", "0", "--config", "mine.toml"])
            .output(),
        bin()
            .args(["dev", "--port", "0"])
            .env("MCP_CONNECT_CONFIG_FILE", "mine.toml")
            .output(),
    ] {
        let output = how.unwrap();
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("mine.toml") && stderr.contains("environment variables only"),
            "{stderr}"
        );
    }
}

/// A URL without a database is refused before dev creates or migrates
/// anything with it (it would otherwise be the database named after the
/// role, `postgres` for the superuser).
#[test]
fn dev_checks_its_database_url_before_using_it() {
    let output = bin()
        .args([
            "dev",
            "--port",
            "0",
            "--database-url",
            "postgres://127.0.0.1:9",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--database-url") && stderr.contains("must name the database"),
        "{stderr}"
    );
    assert!(!stderr.contains("cannot prepare"), "{stderr}");
}

/// A serve deployment's database URL left in the environment is not
/// dev's: dev refuses it before connecting anywhere.
#[test]
fn dev_refuses_a_serve_database_url_instead_of_using_two_databases() {
    for var in ["MCP_CONNECT_DATABASE_URL", "MCP_CONNECT_DATABASE_URL_FILE"] {
        let output = bin()
            .args(["dev", "--port", "0"])
            .env(var, "postgres://127.0.0.1:9/production")
            .output()
            .unwrap();
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(var) && stderr.contains("--database-url"),
            "{stderr}"
        );
        assert!(!stderr.contains("production"), "{stderr}");
    }
}

/// Where dev serves and who issues its tokens are dev's own settings: a
/// serve deployment's left in the environment would override them, and
/// the token dev prints would be refused, its links point elsewhere. dev
/// refuses them, naming the variable to unset.
#[test]
fn dev_refuses_serve_settings_it_sets_itself() {
    for (var, value) in [
        ("MCP_CONNECT_PUBLIC_URL", "https://connect.example.com"),
        ("MCP_CONNECT_BIND", "0.0.0.0:8080"),
        ("MCP_CONNECT_AUTH__ISSUER", "https://idp.example.com"),
        ("MCP_CONNECT_AUTH__WEB_CLIENT_ID", "production-web"),
        ("MCP_CONNECT_PUBLIC_URL_FILE", "/run/secrets/public_url"),
        (
            "MCP_CONNECT_KEYS",
            "k1:c2VjcmV0LWtleS1ieXRlcy1mb3ItdGhlLXRlc3QtMzI=",
        ),
        ("MCP_CONNECT_AUTH__JWKS_URL", "https://idp.example.com/jwks"),
        (
            "MCP_CONNECT_AUTH__INTROSPECTION__URL",
            "https://idp.example.com/introspect",
        ),
    ] {
        // Refused before anything is connected: this database is never asked.
        let output = bin()
            .args([
                "dev",
                "--port",
                "0",
                "--database-url",
                "postgres://127.0.0.1:9/none",
            ])
            .env(var, value)
            .output()
            .unwrap();
        assert!(!output.status.success(), "{var}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(&format!("Unset {var}")), "{stderr}");
        assert!(!stderr.contains(value), "{stderr}");
    }
}

/// The banner says which database dev created, migrated and writes to
/// (without a password: the unit tests of `dev::run` show that).
#[tokio::test]
async fn dev_names_its_database_in_its_banner() {
    use tokio::io::AsyncBufReadExt;
    // Only for its database, dropped at the end.
    let app = spawn_app().await;
    let url = url::Url::parse(&format!("{}/{}", server_url(), app.db_name)).unwrap();
    let mut dev = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-connect"))
        .args(["dev", "--port", "0", "--database-url", url.as_str()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(dev.stdout.take().unwrap()).lines();
    let mut banner = String::new();
    while !banner.contains("Ctrl-C") {
        let line = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
            .await
            .expect("dev mode announces itself")
            .unwrap()
            .expect("the banner, to its end");
        banner.push_str(&line);
        banner.push('\n');
    }
    dev.kill().await.unwrap();
    let host = url.host_str().unwrap();
    let database = banner
        .lines()
        .find(|l| l.contains(&app.db_name))
        .unwrap_or_else(|| panic!("the database is named: {banner}"));
    assert!(database.contains(host), "{banner}");
}

#[test]
fn out_of_range_arguments_are_refused_naming_their_flag() {
    for (args, flag) in [
        (&["health", "--timeout", "0"][..], "--timeout"),
        (&["keys", "generate", "--id", "bad id"][..], "--id"),
        (&["keys", "generate", "--id", &"k".repeat(33)][..], "--id"),
    ] {
        let out = bin().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
        assert!(!stderr.contains("key entry"), "{args:?}: {stderr}");
    }
    let out = bin()
        .args(["keys", "generate", "--id", "k-2026_12"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("k-2026_12:"));
}

#[test]
fn help_lists_the_commands() {
    let output = bin().arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    for word in ["serve", "dev", "migrate", "keys"] {
        assert!(text.contains(word), "{text}");
    }
}

#[tokio::test]
async fn tokens_rekey_reseals_with_the_first_key_so_the_old_one_can_retire() {
    let app = spawn_app().await;
    crate::full_flow::connect_demo(&app, "alice", "octo").await;
    let old = mcp_connect::dev::dev_key_entry(&app.db).await.unwrap();
    let new = mcp_connect::crypto::KeyRing::generate_entry("k2");
    let only_new = |t: &mut toml::Table| {
        t.insert("keys".into(), toml::Value::Array(vec![new.clone().into()]));
    };
    // Before: an instance with only the new key cannot open the tokens
    // (using them would send alice to connect again, so only look).
    let before = app.second_instance_with(only_new).await;
    let missing = mcp_connect::connect::stale_keys::missing_keys(&before.state.connect)
        .await
        .unwrap();
    assert_eq!(missing, vec![("dev1".to_owned(), 1)]);
    // When the tokens were stored and when they expire are the provider's
    // facts, not the key's: re-sealing keeps both (the refresh margin is
    // measured from the first).
    let times = "SELECT concat_ws(' ', tokens_stored_at, access_token_expires_at) FROM connections";
    sqlx::query("UPDATE connections SET tokens_stored_at = now() - interval '1 hour'")
        .execute(&app.db)
        .await
        .unwrap();
    let stored: String = sqlx::query_scalar(times).fetch_one(&app.db).await.unwrap();

    let output = bin()
        .args(["tokens", "rekey"])
        .env("MCP_CONNECT_PUBLIC_URL", &app.base)
        .env(
            "MCP_CONNECT_DATABASE_URL",
            format!("{}/{}", server_url(), app.db_name),
        )
        .env("MCP_CONNECT_KEYS", format!("{new},{old}"))
        .env("MCP_CONNECT_AUTH__ISSUER", app.dev.issuer())
        .env("MCP_CONNECT_INSECURE_HTTP", "true")
        .env("MCP_CONNECT_PROVIDERS__DEMO__CLIENT_ID", "mcp-connect-demo")
        .env("MCP_CONNECT_PROVIDERS__DEMO__CLIENT_SECRET", "unused-here")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("re-sealed 1"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let key_id: String = sqlx::query_scalar("SELECT key_id FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(key_id, "k2");
    let resealed: String = sqlx::query_scalar(times).fetch_one(&app.db).await.unwrap();
    assert_eq!(resealed, stored);

    // After: the new key alone opens them.
    let after = app.second_instance_with(only_new).await;
    let (_, body) = after
        .call_tool("alice", "connect", json!({"provider": "demo"}))
        .await;
    assert_eq!(
        body["result"]["structuredContent"]["account"], "octo",
        "{body}"
    );
}

/// `mcp-connect dev` (or `dev token`) on `database_url` with the
/// environment a developer's shell would give it (`HOME` with no
/// password file, unless `env` names one): its standard error.
fn dev_fails_with(args: &[&str], database_url: &str, env: &[(&str, &str)]) -> String {
    let home = std::env::temp_dir().join(format!("mcp-connect-home-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&home).unwrap();
    let output = bin()
        .arg("dev")
        .args(args)
        .args(["--database-url", database_url])
        .env("HOME", &home)
        .env_remove("PGPASSWORD")
        .env_remove("PGPASSFILE")
        .env_remove("PGUSER")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&home);
    assert!(!output.status.success());
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Against a Postgres that asks for a password, a missing or wrong one is
/// told as such, with where dev takes a password from; never as "is
/// Postgres running?", never with Postgres's own source line, never with
/// the password. A password file others may read, which Postgres clients
/// ignore, is named with its mode, never with what it holds.
#[test]
fn dev_tells_a_refused_password_apart_from_an_unreachable_server() {
    const PASSWORD: &str = "Right-Password-4821";
    let pg = crate::faults::OwnPostgres::start_with_password(PASSWORD);
    let url =
        |password: &str| format!("postgres://postgres{password}@127.0.0.1:{}/dev_db", pg.port);
    let dir = std::env::temp_dir().join(format!("mcp-connect-pgpass-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let loose = dir.join("pgpass");
    std::fs::write(
        &loose,
        format!("127.0.0.1:{}:*:postgres:{PASSWORD}\n", pg.port),
    )
    .unwrap();
    std::fs::set_permissions(&loose, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let loose_file = loose.display().to_string();
    for (args, url, env) in [
        (&["--port", "0"][..], url(""), &[][..]),
        (&["--port", "0"][..], url(":Wrong-Password-1"), &[][..]),
        (
            &["--port", "0"][..],
            url(""),
            &[("PGPASSFILE", loose_file.as_str())][..],
        ),
        (
            &["token", "--sub", "bob"][..],
            url(""),
            &[("PGPASSFILE", loose_file.as_str())][..],
        ),
    ] {
        let stderr = dev_fails_with(args, &url, env);
        assert!(
            stderr.contains("refused user postgres")
                && stderr.contains("PGPASSWORD")
                && stderr.contains("~/.pgpass")
                && stderr.contains("createuser"),
            "{stderr}"
        );
        assert!(!stderr.contains("Postgres running"), "{stderr}");
        assert!(!stderr.contains("at line"), "{stderr}");
        assert!(!stderr.contains("Wrong-Password-1"), "{stderr}");
        assert!(!stderr.contains(PASSWORD), "{stderr}");
        if !env.is_empty() {
            assert!(
                stderr.contains(&loose_file)
                    && stderr.contains("mode 644")
                    && stderr.contains("chmod 600"),
                "{stderr}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A role the server does not have is told as such, with how to make it;
/// a server nobody answers on, as one to start.
#[test]
fn dev_tells_a_missing_role_and_a_server_that_does_not_answer() {
    let mut url = url::Url::parse(&format!("{}/dev_db", server_url())).unwrap();
    url.set_username("no_such_role_7").unwrap();
    url.set_password(None).unwrap();
    let stderr = dev_fails_with(&["--port", "0"], url.as_str(), &[]);
    // A server that asks for a password does not say whether the role
    // exists: the local one of the tests does not ask.
    assert!(
        stderr.contains("no_such_role_7") && stderr.contains("createuser --createdb"),
        "{stderr}"
    );
    assert!(!stderr.contains("Postgres running"), "{stderr}");
    assert!(!stderr.contains("at line"), "{stderr}");
    // Nobody listens on port 9 of loopback.
    let stderr = dev_fails_with(
        &["--port", "0"],
        "postgres://ann:Secret-9@127.0.0.1:9/dev_db",
        &[],
    );
    assert!(
        stderr.contains("cannot reach Postgres")
            && stderr.contains("127.0.0.1:9")
            && stderr.contains("Is Postgres running"),
        "{stderr}"
    );
    assert!(!stderr.contains("Secret-9"), "{stderr}");
}

/// `dev token` reads the keys `dev` stored; on a database without them it
/// names the database it looked in, and creates nothing.
#[tokio::test]
async fn dev_token_names_the_database_without_dev_keys() {
    let name = format!("mcp_connect_test_{}", uuid::Uuid::new_v4().simple());
    let url = format!("{}/{name}", server_url());
    let stderr = tokio::task::spawn_blocking(move || {
        dev_fails_with(&["--port", "8080", "token", "--sub", "bob"], &url, &[])
    })
    .await
    .unwrap();
    assert!(
        stderr.contains(&format!("the database {name} on")) && stderr.contains("no dev keys yet"),
        "{stderr}"
    );
    let mut admin =
        <sqlx::PgConnection as sqlx::Connection>::connect(&format!("{}/postgres", server_url()))
            .await
            .unwrap();
    let created: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(&name)
            .fetch_one(&mut admin)
            .await
            .unwrap();
    assert!(!created, "dev token created {name}");
}

/// `serve` on a port another process holds says so once: the cause is
/// not repeated by the chain of causes printed after it.
#[tokio::test]
async fn serve_on_a_port_in_use_says_why_once() {
    let app = spawn_app().await;
    let key = mcp_connect::dev::dev_key_entry(&app.db).await.unwrap();
    // The app's own port: in use.
    let bind = app.addr.trim_start_matches("http://").to_owned();
    let mut serve = app.operator_command(&key);
    serve
        .arg("serve")
        .env("MCP_CONNECT_BIND", &bind)
        .env("MCP_CONNECT_INSECURE_HTTP", "true")
        .env("MCP_CONNECT_AUTH__WEB_CLIENT_ID", "mcp-connect-web")
        .env("MCP_CONNECT_AUTH__WEB_CLIENT_SECRET", "unused-here")
        .env("MCP_CONNECT_PROVIDERS__DEMO__CLIENT_ID", "mcp-connect-demo")
        .env("MCP_CONNECT_PROVIDERS__DEMO__CLIENT_SECRET", "unused-here");
    let output = tokio::task::spawn_blocking(move || serve.output().unwrap())
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let said = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("an error line: {stderr}"));
    assert!(
        said.contains(&format!("cannot listen on {bind}")) && said.contains("MCP_CONNECT_BIND"),
        "{said}"
    );
    assert!(said.contains("in use"), "{said}");
    assert_eq!(said.matches("(os error").count(), 1, "{said}");
}
