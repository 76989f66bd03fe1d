//! A stored token sealed by a key this ring lacks (retired too early, an
//! instance given too few keys, a key added elsewhere first): the call
//! fails as retryable and the row is left for an instance that has the
//! key; `tokens rekey` says which rows it could not re-seal, start-up
//! warns, and `tokens forget-key` asks the users of a key gone for good to
//! connect again.

use std::time::Duration;

use mcp_connect::{
    connect::vault::{NewConnection, store_connection},
    domain::{ProviderName, UserRef},
    providers::{Account, TokenSet},
};
use secrecy::SecretString;
use serde_json::json;

use crate::helpers::{TestApp, allow, copy_connection, refuse, spawn_app, succeeded};

async fn connect(app: &TestApp, subject: &str) {
    let tokens = TokenSet {
        access_token: SecretString::from(format!("{subject}-access")),
        received: std::time::Instant::now(),
        refresh_token: Some(SecretString::from(format!("{subject}-refresh"))),
        expires_in: Some(Duration::from_secs(3600)),
        scopes: Some(vec!["profile".to_owned()]),
        token_type: "Bearer".to_owned(),
    };
    store_connection(
        &app.state.connect,
        NewConnection {
            user: UserRef::new(&app.dev.issuer(), subject),
            provider: &ProviderName::parse("demo").unwrap(),
            account: &Account {
                id: subject.into(),
                label: subject.into(),
            },
            tokens: &tokens,
            requested_scopes: &[],
            client_id: Some("test-client"),
        },
    )
    .await
    .unwrap();
}

/// Makes `subject`'s row look sealed by key `retired1`, which the ring
/// does not have; returns the key id it had.
async fn retire_key_of(app: &TestApp, subject: &str) -> String {
    retire_key_as(app, subject, "retired1").await
}

/// [`retire_key_of`], with the retired key named `key_id`.
async fn retire_key_as(app: &TestApp, subject: &str, key_id: &str) -> String {
    sqlx::query_scalar(
        "UPDATE connections c SET key_id = $2 FROM connections old
         WHERE c.id = old.id AND c.subject = $1 RETURNING old.key_id",
    )
    .bind(subject)
    .bind(key_id)
    .fetch_one(&app.db)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_token_sealed_by_a_key_this_instance_lacks_fails_as_retryable_and_is_left_alone() {
    let app = spawn_app().await;
    connect(&app, "alice").await;
    let key_id = retire_key_of(&app, "alice").await;
    let (status, body) = app
        .call_tool("alice", "whoami", json!({"provider": "demo"}))
        .await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["data"]["retryable"], true, "{body}");
    assert!(
        !body.to_string().contains("retired1"),
        "the key id is for the log: {body}"
    );
    let status: String = sqlx::query_scalar("SELECT status FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(status, "active", "another instance may hold the key");
    assert!(
        crate::logs::captured()
            .lines()
            .any(|l| l.contains("retired1") && l.contains("this instance lacks")),
        "the log names the key"
    );
    // The key is back (the instance that has it): nothing was lost.
    sqlx::query("UPDATE connections SET key_id = $1")
        .bind(&key_id)
        .execute(&app.db)
        .await
        .unwrap();
    let (_, body) = app
        .call_tool("alice", "whoami", json!({"provider": "demo"}))
        .await;
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
}

fn tokens_command(app: &TestApp, key: &str, args: &[&str]) -> std::process::Output {
    app.operator_command(key)
        .arg("tokens")
        .args(args)
        .output()
        .unwrap()
}

/// A key gone for good: its active connections ask their users to connect
/// again, and no row, whatever its status, keeps tokens sealed by it. From
/// then on it is done: `tokens rekey` and start-up no longer name the key,
/// and the command run again says so.
#[tokio::test]
async fn forgetting_a_key_asks_its_users_to_connect_again() {
    // A key id of this test's own: start-up warnings of other tests share
    // the captured log.
    const GONE: &str = "forgotten-key-3";
    let app = spawn_app().await;
    // Start-up's check of the empty table is done: it names no key.
    key_checks_done(&app, 1).await;
    connect(&app, "alice").await;
    connect(&app, "bob").await;
    connect(&app, "carol").await;
    retire_key_as(&app, "alice", GONE).await;
    // Carol's connection already needed her (its refresh was refused).
    retire_key_as(&app, "carol", GONE).await;
    sqlx::query("UPDATE connections SET status = 'needs_reauth' WHERE subject = 'carol'")
        .execute(&app.db)
        .await
        .unwrap();
    let key = mcp_connect::dev::dev_key_entry(&app.db).await.unwrap();
    let own_key_id = key.split_once(':').unwrap().0.to_owned();

    // A key the ring holds opens its rows: not forgotten.
    let refused = tokens_command(&app, &key, &["forget-key", &own_key_id]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("tokens rekey"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    // Without --yes: what it would change, and nothing changed.
    let asked = tokens_command(&app, &key, &["forget-key", GONE]);
    assert!(!asked.status.success());
    let (said, why) = (
        String::from_utf8_lossy(&asked.stdout),
        String::from_utf8_lossy(&asked.stderr),
    );
    assert!(
        said.contains(&format!("key {GONE} seals the tokens of 2 connection(s)")),
        "{said}"
    );
    assert!(why.contains("nothing was changed: add --yes"), "{why}");
    let active: i64 =
        sqlx::query_scalar("SELECT count(*) FROM connections WHERE status = 'active'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(active, 2, "alice's and bob's, as before");

    let stdout = succeeded(tokens_command(&app, &key, &["forget-key", GONE, "--yes"]));
    assert!(
        stdout.contains(&format!("1 connection(s) sealed by key {GONE}")),
        "{stdout}"
    );
    let statuses: Vec<(String, String)> =
        sqlx::query_as("SELECT subject, status FROM connections ORDER BY subject")
            .fetch_all(&app.db)
            .await
            .unwrap();
    assert_eq!(
        statuses,
        [
            ("alice".to_owned(), "needs_reauth".to_owned()),
            ("bob".to_owned(), "active".to_owned()),
            ("carol".to_owned(), "needs_reauth".to_owned())
        ]
    );
    let still_sealed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM connections
         WHERE key_id = $1 AND (octet_length(access_token) > 0 OR refresh_token IS NOT NULL)",
    )
    .bind(GONE)
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(still_sealed, 0, "no row keeps bytes that cannot open");
    let audited: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_events WHERE kind = 'token_unreadable' AND detail->>'reason' = 'key_forgotten'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(audited, 1);
    let (_, body) = app
        .call_tool("alice", "whoami", json!({"provider": "demo"}))
        .await;
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");

    // Done: run again, it says so; `tokens rekey` and start-up are quiet.
    let again = succeeded(tokens_command(&app, &key, &["forget-key", GONE, "--yes"]));
    assert!(
        again.contains(&format!("key {GONE} was forgotten already")),
        "{again}"
    );
    let rekeyed = succeeded(tokens_command(&app, &key, &["rekey"]));
    assert!(!rekeyed.contains(GONE), "{rekeyed}");
    let missing = mcp_connect::connect::stale_keys::missing_keys(&app.state.connect)
        .await
        .unwrap();
    assert!(missing.is_empty(), "{missing:?}");
    let _restarted = app.second_instance().await;
    key_checks_done(&app, 2).await;
    assert!(
        !crate::logs::captured()
            .lines()
            .any(|l| l.contains(GONE) && l.contains("key ids the ring lacks")),
        "start-up warned about a forgotten key"
    );
}

/// Waits (10 s at most) until `instances` of `app`'s instances have
/// checked the stored key ids at start-up, which they do in the
/// background: each says so once its warnings are out.
async fn key_checks_done(app: &TestApp, instances: usize) {
    let checks = || {
        crate::logs::captured()
            .lines()
            .filter(|l| l.contains("checked the key ids") && l.contains(&app.base))
            .count()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while checks() < instances {
        assert!(std::time::Instant::now() < deadline, "no key check");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A connection holding tokens sealed by a key the ring lacks is reported, and
/// the command exits 1 while one is left: a script does not take it for
/// done. Once `forget-key` has dropped the tokens of that key, nothing
/// is left to do.
#[tokio::test]
async fn rekey_reports_rows_still_sealed_by_other_keys_and_fails_while_one_is_left() {
    let app = spawn_app().await;
    connect(&app, "alice").await;
    connect(&app, "bob").await;
    retire_key_of(&app, "alice").await;
    let key = mcp_connect::dev::dev_key_entry(&app.db).await.unwrap();
    let output = tokens_command(&app, &key, &["rekey"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("1 connection(s) still sealed by keys not in MCP_CONNECT_KEYS: retired1"),
        "{stdout}"
    );
    assert!(stderr.contains("not in MCP_CONNECT_KEYS"), "{stderr}");

    succeeded(tokens_command(
        &app,
        &key,
        &["forget-key", "retired1", "--yes"],
    ));
    let stdout = succeeded(tokens_command(&app, &key, &["rekey"]));
    assert!(!stdout.contains("retired1"), "{stdout}");
}

#[tokio::test]
async fn start_up_warns_about_stored_key_ids_the_ring_lacks() {
    let app = spawn_app().await;
    connect(&app, "carol-stale-key").await;
    sqlx::query("UPDATE connections SET key_id = 'gone-key-7' WHERE subject = 'carol-stale-key'")
        .execute(&app.db)
        .await
        .unwrap();
    let _second = app.second_instance().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let logs = crate::logs::captured();
        if logs
            .lines()
            .any(|l| l.contains("gone-key-7") && l.contains("key ids the ring lacks"))
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no start-up warning");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A row whose tokens do not open is reported and skipped: the rows after
/// it are still re-sealed, and the command fails, saying the older key may
/// not be retired yet.
#[tokio::test]
async fn rekey_goes_on_past_a_row_it_cannot_open_and_says_it_did_not_finish() {
    let app = spawn_app().await;
    for subject in ["alice", "bob", "carol"] {
        connect(&app, subject).await;
    }
    // Bob's access token damaged: its last byte (in the tag) flipped.
    let bob: uuid::Uuid = sqlx::query_scalar(
        "UPDATE connections SET access_token =
             set_byte(access_token, length(access_token) - 1,
                      get_byte(access_token, length(access_token) - 1) # 1)
         WHERE subject = 'bob' RETURNING id",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    let old = mcp_connect::dev::dev_key_entry(&app.db).await.unwrap();
    let new = mcp_connect::crypto::KeyRing::generate_entry("k2");
    let output = tokens_command(&app, &format!("{new},{old}"), &["rekey"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stdout}");
    assert!(stdout.contains("re-sealed 2"), "{stdout}");
    assert!(
        stdout.contains(&format!("connection {bob} not re-sealed")),
        "{stdout}"
    );
    assert!(stderr.contains("do not retire"), "{stderr}");
    let keys: Vec<(String, String)> =
        sqlx::query_as("SELECT subject, key_id FROM connections ORDER BY subject")
            .fetch_all(&app.db)
            .await
            .unwrap();
    let old_id = old.split_once(':').unwrap().0;
    assert_eq!(
        keys,
        [
            ("alice".to_owned(), "k2".to_owned()),
            ("bob".to_owned(), old_id.to_owned()),
            ("carol".to_owned(), "k2".to_owned()),
        ]
    );
}

/// A re-seal reads the rows on older keys a page (a thousand) at a time:
/// rows past the first page are re-sealed, and a row it gave up on is
/// neither tried again on the next pass nor counted as left.
#[tokio::test]
async fn rekey_reads_page_after_page_and_gives_up_on_a_row_once() {
    let app = spawn_app().await;
    for subject in ["alice", "bob"] {
        connect(&app, subject).await;
    }
    // 1,003 copies of alice's row under ids that sort before any random
    // one: their tokens are bound to alice's id, so none opens.
    sqlx::query(
        "INSERT INTO connections (id, issuer, subject, provider, account_id, account_label,
             scopes, access_token, refresh_token, key_id, access_token_expires_at, status)
         SELECT ('00000000-0000-4000-8000-' || lpad(i::text, 12, '0'))::uuid, issuer,
             'copy-' || i, provider, account_id, account_label, scopes, access_token,
             refresh_token, key_id, access_token_expires_at, status
         FROM connections, generate_series(1, 1003) AS i WHERE subject = 'alice'",
    )
    .execute(&app.db)
    .await
    .unwrap();
    let rotated = rotated(&app).await;
    let rekeyed = rotated.state.connect.rekey().await.unwrap();
    assert_eq!(
        rekeyed.resealed, 2,
        "alice's and bob's, past the first page"
    );
    assert_eq!(
        rekeyed.failed.len(),
        1003,
        "each copy once, not once a pass"
    );
    assert_eq!(rekeyed.left_on_older_keys, 0, "given up is not left");
    assert!(!rekeyed.finished());
    let on_k2 = "SELECT count(*) FROM connections WHERE key_id = 'k2'";
    assert_eq!(crate::helpers::count(&app, on_k2).await, 2);
}

/// A connection that cannot be marked (here a trigger refuses the update,
/// as a lock timeout or a failing database would) makes the command fail
/// and say to run it again; once it can, the run is done. A key id no row
/// is sealed by says so.
#[tokio::test]
async fn forgetting_a_key_fails_while_a_connection_cannot_be_marked() {
    let app = spawn_app().await;
    connect(&app, "alice").await;
    retire_key_of(&app, "alice").await;
    let key = mcp_connect::dev::dev_key_entry(&app.db).await.unwrap();
    refuse(&app.db, "connections", "UPDATE").await;

    let failed = tokens_command(&app, &key, &["forget-key", "retired1", "--yes"]);
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success(), "{stderr}");
    assert!(
        stderr.contains("1 could not be marked") && stderr.contains("run the command again"),
        "{stderr}"
    );

    allow(&app.db, "connections").await;
    let stdout = succeeded(tokens_command(
        &app,
        &key,
        &["forget-key", "retired1", "--yes"],
    ));
    assert!(
        stdout.contains("1 connection(s) sealed by key retired1"),
        "{stdout}"
    );
    // A key id that seals nothing: nothing to do, with or without --yes.
    let stdout = succeeded(tokens_command(&app, &key, &["forget-key", "retird1"]));
    assert!(
        stdout
            .contains("no connection or revocation still owed holds tokens sealed by key retird1"),
        "{stdout}"
    );
    let stdout = succeeded(tokens_command(
        &app,
        &key,
        &["forget-key", "retird1", "--yes"],
    ));
    assert!(
        stdout.contains("no connection is sealed by key retird1"),
        "{stdout}"
    );
}

/// A key that sealed most of a large deployment: the tokens are dropped a
/// page at a time, each statement well within the database's time limit,
/// where one statement over every row outlasted it and every rerun did the
/// same, so that nothing was ever dropped.
#[tokio::test]
async fn forgetting_a_key_that_sealed_many_connections_drops_them_page_by_page() {
    const GONE: &str = "forgotten-key-many";
    const MANY: i64 = 200_000;
    let app = spawn_app().await;
    connect(&app, "alice").await;
    retire_key_as(&app, "alice", GONE).await;
    sqlx::query("UPDATE connections SET status = 'needs_reauth' WHERE subject = 'alice'")
        .execute(&app.db)
        .await
        .unwrap();
    // Copies of alice's row, as other people's connections waiting for them.
    copy_connection(&app, "alice", MANY, false, ("", 0.0)).await;
    sqlx::query("ANALYZE connections")
        .execute(&app.db)
        .await
        .unwrap();
    let key = mcp_connect::dev::dev_key_entry(&app.db).await.unwrap();

    // A limit one statement over every row cannot keep, and a page can.
    let forgot = app
        .operator_command(&key)
        .env("MCP_CONNECT_DATABASE__STATEMENT_TIMEOUT_MS", "300")
        .args(["tokens", "forget-key", GONE, "--yes"])
        .output()
        .unwrap();
    let stdout = succeeded(forgot);
    assert!(
        stdout.contains(&format!(
            "the tokens key {GONE} sealed were dropped from {} connection(s)",
            MANY + 1
        )),
        "{stdout}"
    );
    let still_sealed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM connections WHERE key_id = $1 AND octet_length(access_token) > 0",
    )
    .bind(GONE)
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(still_sealed, 0);
}

/// `tokens rekey` on a large table with nothing left to re-seal, the
/// planner's statistics still saying many rows are on an older key (as
/// right after a re-seal, before autovacuum analyzes the table): it ends,
/// every statement within a short time limit. (A statement that went on
/// until it found a page of rows to re-seal walked the whole table; at a
/// million rows that outlasted the default limit. That each statement
/// reads a page is `a_page_of_rows_to_reseal_is_a_page_of_ids`.)
#[tokio::test]
async fn rekey_reads_a_page_per_statement_whatever_the_statistics_say() {
    const MANY: i64 = 300_000;
    let app = spawn_app().await;
    connect(&app, "alice").await;
    // The statistics stay as this test makes them.
    sqlx::query("ALTER TABLE connections SET (autovacuum_enabled = false)")
        .execute(&app.db)
        .await
        .unwrap();
    // Copies of alice's row, three in ten on the older key; the
    // statistics taken then, the older key's rows re-sealed since.
    copy_connection(&app, "alice", MANY, false, ("older-k", 0.3)).await;
    sqlx::query("ANALYZE connections")
        .execute(&app.db)
        .await
        .unwrap();
    let current = mcp_connect::dev::dev_key_entry(&app.db).await.unwrap();
    let older = mcp_connect::crypto::KeyRing::generate_entry("older-k");
    let current_id = current.split_once(':').unwrap().0.to_owned();
    sqlx::query("UPDATE connections SET key_id = $1 WHERE key_id = 'older-k'")
        .bind(&current_id)
        .execute(&app.db)
        .await
        .unwrap();
    sqlx::query("VACUUM connections")
        .execute(&app.db)
        .await
        .unwrap();

    let rekeyed = app
        .operator_command(&format!("{current},{older}"))
        .env("MCP_CONNECT_DATABASE__STATEMENT_TIMEOUT_MS", "300")
        .args(["tokens", "rekey"])
        .output()
        .unwrap();
    let stdout = succeeded(rekeyed);
    assert!(stdout.contains("re-sealed 0 connection(s)"), "{stdout}");
}

/// Each statement of a re-seal reads one page of rows by id, whatever they
/// are sealed by: with nothing on an older key it says so a page at a
/// time (the page's last id, to go on from), rather than reading on
/// until it has found a page's worth or the table has ended.
#[tokio::test]
async fn a_page_of_rows_to_reseal_is_a_page_of_ids() {
    use mcp_connect::db::connections::ids_not_sealed_by;
    let app = spawn_app().await;
    connect(&app, "alice").await;
    copy_connection(&app, "alice", 2500, false, ("", 0.0)).await;
    let current: String = sqlx::query_scalar("SELECT key_id FROM connections LIMIT 1")
        .fetch_one(&app.db)
        .await
        .unwrap();
    let ids: Vec<uuid::Uuid> = sqlx::query_scalar("SELECT id FROM connections ORDER BY id")
        .fetch_all(&app.db)
        .await
        .unwrap();

    let first = ids_not_sealed_by(&app.db, &current, uuid::Uuid::nil(), 1000)
        .await
        .unwrap();
    assert!(first.found.is_empty());
    assert_eq!((first.read, first.last), (1000, Some(ids[999])));
    let last = ids_not_sealed_by(&app.db, &current, ids[1999], 1000)
        .await
        .unwrap();
    assert_eq!((last.read, last.last), (501, Some(ids[2500])));
    // On another key, the rows of the page are named.
    let older = ids_not_sealed_by(&app.db, "another-key", ids[1999], 1000)
        .await
        .unwrap();
    assert_eq!(older.found.len(), 501);
    assert_eq!(older.found[0], (ids[2000], current.clone()));
}

/// Stored key ids are counted a page of connections per statement (start-up
/// and `tokens rekey` counted every row in one, past the statement time
/// limit at a million rows): a page says how many of its rows each key
/// sealed, leaving out rows whose tokens were dropped, and where it ended.
#[tokio::test]
async fn key_ids_are_counted_a_page_of_connections_at_a_time() {
    use mcp_connect::db::connections::count_by_key_id;
    let app = spawn_app().await;
    connect(&app, "alice").await;
    copy_connection(&app, "alice", 2500, false, ("", 0.0)).await;
    let ids: Vec<uuid::Uuid> = sqlx::query_scalar("SELECT id FROM connections ORDER BY id")
        .fetch_all(&app.db)
        .await
        .unwrap();
    // Of the last page's rows, two on a key gone, one of them forgotten.
    sqlx::query("UPDATE connections SET key_id = 'gone' WHERE id = ANY($1)")
        .bind(&ids[2100..2102])
        .execute(&app.db)
        .await
        .unwrap();
    sqlx::query("UPDATE connections SET access_token = ''::bytea WHERE id = $1")
        .bind(ids[2101])
        .execute(&app.db)
        .await
        .unwrap();

    let first = count_by_key_id(&app.db, uuid::Uuid::nil(), 1000)
        .await
        .unwrap();
    assert_eq!(first.found, [("dev1".to_owned(), 1000)]);
    assert_eq!((first.read, first.last), (1000, Some(ids[999])));
    let last = count_by_key_id(&app.db, ids[1999], 1000).await.unwrap();
    assert_eq!(
        last.found,
        [("dev1".to_owned(), 499), ("gone".to_owned(), 1)]
    );
    assert_eq!((last.read, last.last), (501, Some(ids[2500])));
    let missing = mcp_connect::connect::stale_keys::missing_keys(&app.state.connect)
        .await
        .unwrap();
    assert_eq!(missing, [("gone".to_owned(), 1)]);
}

/// `tokens rekey` re-seals a page of connections in one transaction, not
/// one row at a time (three commits and half a dozen round trips a row
/// made a million rows take hours): the rows of a page share the time
/// their transaction began, and every token, refresh tokens and their
/// absence included, opens with the new key afterwards.
#[tokio::test]
async fn rekey_reseals_a_page_of_connections_in_one_transaction() {
    use futures::StreamExt as _;
    use secrecy::ExposeSecret as _;
    let app = spawn_app().await;
    let subjects: Vec<String> = (0..1200).map(|i| format!("user-{i:04}")).collect();
    futures::stream::iter(&subjects)
        .for_each_concurrent(8, |subject| connect(&app, subject))
        .await;
    // Some hold no refresh token.
    sqlx::query("UPDATE connections SET refresh_token = NULL WHERE subject LIKE 'user-00%'")
        .execute(&app.db)
        .await
        .unwrap();
    let (rotated, new) = rotated_to_new_key(&app).await;

    let rekeyed = rotated.state.connect.rekey().await.unwrap();
    assert_eq!(rekeyed.resealed, 1200);
    assert!(rekeyed.finished());
    let on_k2 = "SELECT count(*) FROM connections WHERE key_id = 'k2'";
    assert_eq!(crate::helpers::count(&app, on_k2).await, 1200);
    let transactions = "SELECT count(DISTINCT updated_at) FROM connections";
    assert_eq!(
        crate::helpers::count(&app, transactions).await,
        2,
        "a thousand rows in one transaction, the other two hundred in another"
    );
    assert_eq!(
        crate::helpers::count(&app, "SELECT count(*) FROM refresh_claims").await,
        0,
        "the page's claims are released"
    );

    // An instance with the new key alone opens them all.
    let only_new = app
        .second_instance_with(|t| {
            t.insert("keys".into(), toml::Value::Array(vec![new.clone().into()]));
        })
        .await;
    for subject in [
        "user-0000",
        "user-0042",
        "user-0999",
        "user-1000",
        "user-1199",
    ] {
        let token = only_new.demo_token(subject).await;
        assert_eq!(
            token.access_token.expose_secret(),
            format!("{subject}-access")
        );
        let refresh = only_new.state.connect.refresh_token_of(&token).unwrap();
        let expected = (!subject.starts_with("user-00")).then(|| format!("{subject}-refresh"));
        assert_eq!(
            refresh.as_ref().map(|r| r.expose_secret().to_owned()),
            expected,
            "{subject}"
        );
    }
}

/// A ring of the dev key and a new one, `k2`, first: an instance with it
/// re-seals what the dev key sealed.
async fn rotated(app: &TestApp) -> TestApp {
    rotated_to_new_key(app).await.0
}

/// [`rotated`], and the new key's entry.
async fn rotated_to_new_key(app: &TestApp) -> (TestApp, String) {
    let old = mcp_connect::dev::dev_key_entry(&app.db).await.unwrap();
    let new = mcp_connect::crypto::KeyRing::generate_entry("k2");
    let rotated = app
        .second_instance_with(|t| {
            let keys = vec![new.clone().into(), old.into()];
            t.insert("keys".into(), toml::Value::Array(keys));
        })
        .await;
    (rotated, new)
}

async fn key_of(app: &TestApp, subject: &str) -> String {
    sqlx::query_scalar("SELECT key_id FROM connections WHERE subject = $1")
        .bind(subject)
        .fetch_one(&app.db)
        .await
        .unwrap()
}

/// Starts `tokens rekey` on a rotated instance (returned: it serves
/// while the re-seal runs) in the background and waits (3 s at most)
/// until alice's and carol's rows, which nothing holds, are re-sealed:
/// the page did not wait for bob's.
async fn page_resealed_but_bob(
    app: &TestApp,
) -> (
    TestApp,
    tokio::task::JoinHandle<anyhow::Result<mcp_connect::connect::vault::Rekeyed>>,
) {
    let rotated = rotated(app).await;
    let rekeying = tokio::spawn({
        let state = rotated.state.clone();
        async move { mcp_connect::connect::vault::rekey_all(&state.connect).await }
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while key_of(app, "carol").await != "k2" {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the rest of the page waits for bob's row"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(key_of(app, "alice").await, "k2");
    (rotated, rekeying)
}

/// A row another transaction holds (a refresh waiting for its provider,
/// a reconnect storing) does not hold up its page: the rest of the page
/// is re-sealed and committed at once, and that row alone once it is
/// free. (A page that waited for it would hold every other row of the
/// page meanwhile.)
#[tokio::test]
async fn a_page_is_resealed_around_a_row_another_transaction_holds() {
    let app = spawn_app().await;
    for subject in ["alice", "bob", "carol"] {
        connect(&app, subject).await;
    }
    let mut holder = app.db.begin().await.unwrap();
    sqlx::query("SELECT id FROM connections WHERE subject = 'bob' FOR NO KEY UPDATE")
        .execute(&mut *holder)
        .await
        .unwrap();
    let (_rotated, rekeying) = page_resealed_but_bob(&app).await;
    assert_eq!(key_of(&app, "bob").await, "dev1", "still held");
    assert!(!rekeying.is_finished(), "bob's row is waited for alone");
    holder.commit().await.unwrap();

    let rekeyed = rekeying.await.unwrap().unwrap();
    assert_eq!(rekeyed.resealed, 3);
    assert!(rekeyed.finished());
    assert_eq!(key_of(&app, "bob").await, "k2");
    let count = crate::helpers::count;
    assert_eq!(count(&app, "SELECT count(*) FROM refresh_claims").await, 0);
}

/// A connection whose refresh another instance has claimed (that refresh
/// may still write over the row as it read it) is left out of its page,
/// its claim untouched, and re-sealed alone once the claim has ended.
#[tokio::test]
async fn a_page_leaves_a_connection_whose_refresh_is_claimed_elsewhere() {
    let app = spawn_app().await;
    for subject in ["alice", "bob", "carol"] {
        connect(&app, subject).await;
    }
    let elsewhere: uuid::Uuid = sqlx::query_scalar(
        "INSERT INTO refresh_claims (connection_id, claim_id, claimed_until)
         SELECT id, gen_random_uuid(), now() + interval '60 seconds'
         FROM connections WHERE subject = 'bob' RETURNING claim_id",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    let (_rotated, rekeying) = page_resealed_but_bob(&app).await;
    assert_eq!(key_of(&app, "bob").await, "dev1", "claimed elsewhere");
    let claims: Vec<uuid::Uuid> = sqlx::query_scalar("SELECT claim_id FROM refresh_claims")
        .fetch_all(&app.db)
        .await
        .unwrap();
    assert_eq!(claims, [elsewhere], "the other claim is left as it was");
    assert!(!rekeying.is_finished(), "bob waits for the claim to end");
    // The refresh that held it ends.
    sqlx::query("DELETE FROM refresh_claims")
        .execute(&app.db)
        .await
        .unwrap();

    let rekeyed = rekeying.await.unwrap().unwrap();
    assert_eq!(rekeyed.resealed, 3);
    assert_eq!(key_of(&app, "bob").await, "k2");
}

/// A forgotten key that sealed many working connections: their users are
/// asked to connect again a page per transaction, each row with its audit
/// row and webhook event written in it (the audit rows of a page share
/// their transaction's time), every statement within a short time limit.
/// One row at a time, with three commits each, a million rows took hours.
#[tokio::test]
async fn forgetting_a_key_marks_a_page_of_connections_per_transaction() {
    const GONE: &str = "forgotten-key-pages";
    const MANY: i64 = 2_500;
    let app = spawn_app().await;
    connect(&app, "alice").await;
    retire_key_as(&app, "alice", GONE).await;
    copy_connection(&app, "alice", MANY, false, ("", 0.0)).await;
    let key = mcp_connect::dev::dev_key_entry(&app.db).await.unwrap();

    let forgot = app
        .operator_command(&key)
        .env("MCP_CONNECT_DATABASE__STATEMENT_TIMEOUT_MS", "300")
        // An endpoint that wants every event: nothing is delivered by the
        // command, the events wait in the outbox for the instances.
        .env(
            "MCP_CONNECT_WEBHOOKS__ENDPOINTS__OPS__URL",
            "http://127.0.0.1:9/events",
        )
        .env(
            "MCP_CONNECT_WEBHOOKS__ENDPOINTS__OPS__SECRET",
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        )
        .env(
            "MCP_CONNECT_WEBHOOKS__ENDPOINTS__OPS__ALLOW_PRIVATE_NETWORK",
            "true",
        )
        .args(["tokens", "forget-key", GONE, "--yes"])
        .output()
        .unwrap();
    let stdout = succeeded(forgot);
    assert!(
        stdout.contains(&format!(
            "{} connection(s) sealed by key {GONE} now ask their users to connect again",
            MANY + 1
        )),
        "{stdout}"
    );
    let count = crate::helpers::count;
    let active = "SELECT count(*) FROM connections WHERE status = 'active'";
    assert_eq!(count(&app, active).await, 0);
    let audited = "SELECT count(*) FROM audit_events
                   WHERE kind = 'token_unreadable' AND detail->>'reason' = 'key_forgotten'
                     AND detail->>'key_id' = 'forgotten-key-pages'
                     AND detail->>'connection_id' IS NOT NULL";
    assert_eq!(count(&app, audited).await, MANY + 1);
    let transactions =
        "SELECT count(DISTINCT at) FROM audit_events WHERE kind = 'token_unreadable'";
    assert_eq!(
        count(&app, transactions).await,
        3,
        "two pages of a thousand rows and one of the rest"
    );
    let events = "SELECT count(DISTINCT event_id) FROM event_outbox
                  WHERE endpoint = 'ops' AND event_type = 'connection.reauth_required'
                    AND payload->'data'->>'reason' = 'token_unreadable'
                    AND payload->'data'->>'subject' LIKE 'bulk-%'";
    assert_eq!(count(&app, events).await, MANY);
    let still_sealed = "SELECT count(*) FROM connections WHERE octet_length(access_token) > 0";
    assert_eq!(count(&app, still_sealed).await, 0);
}

/// A working connection another transaction holds (a refresh waiting for
/// its provider on an instance that still has the key) does not hold up
/// its page: the rest is marked and committed at once, that row alone
/// once it is free. The row held is the page's first, which a pass one
/// row at a time in id order waited for before marking any other.
#[tokio::test]
async fn a_forgotten_keys_page_is_marked_around_a_row_another_transaction_holds() {
    const GONE: &str = "forgotten-key-held";
    let app = spawn_app().await;
    for subject in ["alice", "bob", "carol"] {
        connect(&app, subject).await;
        retire_key_as(&app, subject, GONE).await;
    }
    let subjects: Vec<String> = sqlx::query_scalar("SELECT subject FROM connections ORDER BY id")
        .fetch_all(&app.db)
        .await
        .unwrap();
    let (held, others) = subjects.split_first().unwrap();
    let mut holder = app.db.begin().await.unwrap();
    sqlx::query("SELECT id FROM connections WHERE subject = $1 FOR NO KEY UPDATE")
        .bind(held)
        .execute(&mut *holder)
        .await
        .unwrap();
    let forgetting = tokio::spawn({
        let state = app.state.clone();
        async move { mcp_connect::connect::stale_keys::forget_key(&state.connect, GONE).await }
    });
    let status_of = async |subject: &str| -> String {
        sqlx::query_scalar("SELECT status FROM connections WHERE subject = $1")
            .bind(subject)
            .fetch_one(&app.db)
            .await
            .unwrap()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    for other in others {
        while status_of(other).await != "needs_reauth" {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the rest of the page waits for the row held"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert_eq!(status_of(held).await, "active", "still held");
    assert!(
        !forgetting.is_finished(),
        "the row held is waited for alone"
    );
    holder.commit().await.unwrap();

    let forgotten = forgetting.await.unwrap().unwrap();
    assert_eq!(forgotten.marked, 3);
    assert_eq!(forgotten.failed, 0);
    assert_eq!(forgotten.dropped, 3);
    assert_eq!(status_of(held).await, "needs_reauth");
}

/// A connection re-sealed with a key this instance lacks while its refresh
/// waited for the row (`tokens rekey` on an instance that has a new key
/// first): the refresh leaves it, retryable, as a call's first read does;
/// it failed as an internal error, the token not opening.
#[tokio::test]
async fn a_refresh_finding_its_row_resealed_with_a_key_it_lacks_is_retryable() {
    let app = spawn_app().await;
    connect(&app, "alice").await;
    // Due for a refresh.
    sqlx::query(
        "UPDATE connections SET tokens_stored_at = now() - interval '1 hour',
             access_token_expires_at = now() + interval '30 seconds'",
    )
    .execute(&app.db)
    .await
    .unwrap();
    // The re-seal holds the row until it commits.
    let mut reseal = app.db.begin().await.unwrap();
    sqlx::query("UPDATE connections SET key_id = 'k2'")
        .execute(&mut *reseal)
        .await
        .unwrap();
    let refreshing = tokio::spawn({
        let (state, issuer) = (app.state.clone(), app.dev.issuer());
        async move {
            let provider = state.connect.provider("demo").unwrap();
            mcp_connect::connect::vault::usable_token(
                &state.connect,
                UserRef::new(&issuer, "alice"),
                provider,
                &[],
            )
            .await
        }
    });
    crate::helpers::until_blocked(&app, 1).await;
    reseal.commit().await.unwrap();

    let e = refreshing.await.unwrap().unwrap_err();
    assert!(
        e.downcast_ref::<mcp_connect::connect::stale_keys::KeyMissing>()
            .is_some(),
        "{e:#}"
    );
}
