//! Postgres: the pool, migrations, and one module per table with free async
//! functions taking `impl PgExecutor`, so callers pass a pool or a transaction.
//!
//! Every statement of the service is here, and every one is checked against
//! the schema of `migrations/` when the crate is compiled (`sqlx::query!`
//! and friends), from the offline data in `.sqlx/`:
//! `scripts/sqlx-prepare.sh` rewrites it, CI checks it is current. The only
//! statements the macros cannot take are sent as plain strings and say why
//! where they are: `CREATE DATABASE` (a name is not a parameter), the read
//! of the migrator's own table, and the `LISTEN` sqlx's listener sends.
//!
//! sqlx 0.9: its first stable release of the line (May 2026), with every
//! feature used here (`runtime-tokio`, `tls-rustls-aws-lc-rs`, `postgres`,
//! `macros`, `migrate`, `uuid`, `chrono`, `json`); nothing else in the
//! dependency tree (rmcp, actix) pins sqlx. It needs Rust 1.94, hence the
//! crate's `rust-version`. Its `query()` takes only `&'static str` unless
//! the caller writes `AssertSqlSafe`, which makes a spliced statement easy
//! to find.

pub mod advisory_lock;
pub mod audit;
pub mod backend_memory;
pub mod call_accounts;
pub mod client_grants;
pub mod compatibility;
pub mod connections;
pub mod dev_secrets;
pub mod event_outbox;
pub mod expiry;
pub mod failures;
pub mod faults;
pub mod hot;
pub mod migration_locks;
pub mod notifications;
pub mod oauth_flows;
pub mod page;
pub mod params;
pub mod pending_revocations;
pub mod refresh_claims;
pub mod tickets;
pub mod transaction;
pub mod wait;
pub mod web_sessions;
pub mod worker_stops;

use secrecy::{ExposeSecret, SecretString};
use sqlx::{
    ConnectOptions, Connection, PgPool,
    migrate::Migrator,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use std::{str::FromStr, time::Duration};

/// The migrations in `migrations/`, embedded in the binary.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// What can stop the database from being prepared. Each message says what
/// Postgres said (see [`failures::Said`]); no variant is the `source` of
/// another error, since `main` prints the whole chain, which would say the
/// cause twice.
#[derive(Debug, thiserror::Error)]
pub enum DbSetupError {
    #[error("the database URL is not valid: {0}")]
    BadUrl(sqlx::Error),
    /// The server did not answer, or refused the login.
    #[error("{}", failures::connect_failure(place, error))]
    Connect {
        place: Box<failures::Place>,
        error: sqlx::Error,
    },
    #[error("cannot create database {name}: {}", failures::Said(error))]
    Create { name: String, error: sqlx::Error },
    #[error(
        "database {name} does not exist, and database_create_if_missing (on by default) \
         cannot create it without a connection to the server's `postgres` database, which \
         failed ({}): create the database for the service's role, or let that role \
         connect to `postgres`",
        failures::Said(cause)
    )]
    Maintenance { name: String, cause: sqlx::Error },
    #[error(
        "database {name} does not exist: create it for the service's role, or let \
         `mcp-connect serve` or `migrate` create it (database_create_if_missing = true)"
    )]
    Missing { name: String },
    #[error("migrations failed: {}", failures::migration_failure(.0))]
    Migrate(sqlx::migrate::MigrateError),
    #[error(
        "this database was migrated by a newer release, in a way this release cannot run on: \
         it needs a release that embeds migration {needs} (this one's newest is {newest}); \
         start that release or a newer one"
    )]
    TooOld { needs: i64, newest: i64 },
    #[error(
        "the database has migration {version}, which this release does not embed although it \
         embeds later ones: was a migration file renamed or removed? Restore it, or start the \
         release that applied it"
    )]
    UnknownMigration { version: i64 },
    #[error("cannot read which releases the schema allows: {}", failures::Said(.0))]
    Compatibility(sqlx::Error),
}

impl From<sqlx::migrate::MigrateError> for DbSetupError {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        Self::Migrate(e)
    }
}

impl DbSetupError {
    /// A failure to reach the database `options` name, or to be let in.
    pub fn connect(options: &PgConnectOptions, error: sqlx::Error) -> Self {
        Self::Connect {
            place: Box::new(failures::Place::of(options)),
            error,
        }
    }
}

pub fn connect_options(url: &SecretString) -> Result<PgConnectOptions, DbSetupError> {
    let url = with_login_user(url, |v| std::env::var(v).ok(), os_login_name);
    PgConnectOptions::from_str(url.expose_secret())
        .map(|o| o.log_statements(tracing::log::LevelFilter::Trace))
        .map_err(DbSetupError::BadUrl)
}

/// `url`, naming the role [`login_user_for`] gives when it names none (as
/// its `user` parameter). In the URL, not set on the parsed options: sqlx
/// looks the password up in the password file (`PGPASSFILE`, `~/.pgpass`)
/// as it parses, for the user it has then, and not again after.
fn with_login_user(
    url: &SecretString,
    env: impl Fn(&str) -> Option<String>,
    os_name: impl FnOnce() -> Option<String>,
) -> SecretString {
    let Some(user) = login_user_for(url.expose_secret(), env, os_name) else {
        return url.clone();
    };
    // One the URL parser refuses, sqlx refuses too, and says why.
    let Ok(mut named) = url::Url::parse(url.expose_secret()) else {
        return url.clone();
    };
    named.query_pairs_mut().append_pair("user", &user);
    SecretString::from(String::from(named))
}

/// The role to connect as when the URL names none (neither before its
/// host nor as its `user` parameter) and `PGUSER` is unset: the login name
/// from `USER` or `LOGNAME`, or else the account this process runs as
/// (`os_name`), as `psql` would use. sqlx 0.9 is built here without asking
/// the OS and connects as "anonymous", so `postgres://localhost/db` failed
/// where `psql` works.
fn login_user_for(
    url: &str,
    env: impl Fn(&str) -> Option<String>,
    os_name: impl FnOnce() -> Option<String>,
) -> Option<String> {
    let names_user = url::Url::parse(url)
        .is_ok_and(|u| !u.username().is_empty() || u.query_pairs().any(|(k, _)| k == "user"));
    if names_user || env("PGUSER").is_some() {
        return None;
    }
    ["USER", "LOGNAME"]
        .into_iter()
        .filter_map(&env)
        .find(|name| !name.is_empty())
        .or_else(os_name)
}

/// The name of the account this process runs as, from `/etc/passwd`
/// (Linux: the owner of `/proc/self`), for shells and containers that set
/// neither `USER` nor `LOGNAME`; `None` where that cannot be read.
fn os_login_name() -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").ok()?.uid();
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    account_of(&passwd, uid)
}

/// The name `passwd` (the `/etc/passwd` format) gives `uid`.
fn account_of(passwd: &str, uid: u32) -> Option<String> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let _password = fields.next()?;
        let found = fields.next()?.parse::<u32>().ok()? == uid;
        (found && !name.is_empty()).then(|| name.to_owned())
    })
}

/// A lazily connecting pool: the service starts (and `/readyz` reports) even
/// while Postgres is briefly away.
pub fn pool(options: PgConnectOptions, max_connections: u32) -> PgPool {
    pool_with(options, max_connections, Duration::from_secs(5))
}

/// [`pool`] giving up on a connection after `acquire_timeout`.
pub fn pool_with(
    options: PgConnectOptions,
    max_connections: u32,
    acquire_timeout: Duration,
) -> PgPool {
    pool_options(max_connections, acquire_timeout).connect_lazy_with(options)
}

fn pool_options(max_connections: u32, acquire_timeout: Duration) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(acquire_timeout)
        // A ping before every use doubles the round trips of every query; a
        // dead connection surfaces as a query error instead, and the pool
        // replaces it.
        .test_before_acquire(false)
        .after_connect(|conn, _| Box::pin(backend_memory::keep_freed_memory(conn)))
}

/// The serving instance's pool: [`pool_with`], which closes instead of
/// handing out a connection opened before a server worker last stopped
/// ([`worker_stops`]).
pub fn serving_pool(
    options: PgConnectOptions,
    max_connections: u32,
    acquire_timeout: Duration,
    stops: &worker_stops::WorkerStops,
) -> PgPool {
    let stops = stops.clone();
    pool_options(max_connections, acquire_timeout)
        .before_acquire(move |_, meta| {
            let serves = stops.serves(meta.age);
            Box::pin(async move { Ok(serves) })
        })
        .connect_lazy_with(options)
}

/// How an instance's `database_max_connections` are shared: half for the
/// pool, half for the per-request connections of [`hot`]. Returns
/// `(pool, hot)`; with fewer than two the pool gets them all.
pub fn split_connections(max_connections: u32) -> (u32, usize) {
    let hot = max_connections / 2;
    (max_connections - hot, hot as usize)
}

/// How long a server has to accept a connection and answer a first query
/// while a command without settings for it (`migrate`, `dev`) prepares the
/// database; `database.connect_timeout_secs`'s default.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// How long `CREATE DATABASE` may take at most (it copies the template
/// database, and waits for another session's on the same name).
const CREATE_DATABASE_DEADLINE: Duration = Duration::from_secs(60);

/// The database of every Postgres server that `CREATE DATABASE` is sent
/// from.
const MAINTENANCE_DATABASE: &str = "postgres";

/// Creates the target database if it does not exist. The target is tried
/// first: a role may be allowed to connect to its own database only (by
/// `pg_hba.conf`, a `REVOKE CONNECT` on `postgres`, or a PgBouncer that
/// lists just that one), and then the maintenance database must not be
/// needed while the target is there. The connection and each statement
/// give up after `answer_within`: a server that accepts connections and
/// never answers (frozen, or a wrong port's listener) fails the attempt
/// instead of holding start-up.
pub async fn create_database_if_missing(
    options: &PgConnectOptions,
    answer_within: Duration,
) -> Result<(), DbSetupError> {
    match faults::deadline(answer_within, options.connect()).await {
        Ok(conn) => {
            let _ = conn.close().await;
            Ok(())
        }
        Err(e) if is_missing_database(&e) => create_database(options, answer_within).await,
        Err(e) => Err(DbSetupError::connect(options, e)),
    }
}

/// Postgres's answer to a connection to a database that does not exist.
fn is_missing_database(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|code| code == "3D000")
}

/// Creates the target database from the maintenance database of the same
/// server, unless another instance has created it since.
async fn create_database(
    options: &PgConnectOptions,
    answer_within: Duration,
) -> Result<(), DbSetupError> {
    let name = options
        .get_database()
        .unwrap_or(MAINTENANCE_DATABASE)
        .to_owned();
    let mut conn = faults::deadline(
        answer_within,
        options.clone().database(MAINTENANCE_DATABASE).connect(),
    )
    .await
    .map_err(|cause| DbSetupError::Maintenance {
        name: name.clone(),
        cause,
    })?;
    let exists = faults::deadline(
        answer_within,
        sqlx::query_scalar!(
            r#"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1) AS "exists!""#,
            name,
        )
        .fetch_one(&mut conn),
    )
    .await
    .map_err(|e| DbSetupError::connect(options, e))?;
    if !exists {
        // Not checkable: a database name is an identifier, never a
        // parameter. Quoted here, and nothing but the name is spliced in.
        let quoted = format!("\"{}\"", name.replace('"', "\"\""));
        let created = faults::deadline(
            CREATE_DATABASE_DEADLINE.max(answer_within),
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {quoted}")))
                .execute(&mut conn),
        )
        .await;
        // Another instance may have created it in the meantime: when it
        // did so first, 42P04 (duplicate_database); when both were creating
        // it at once, the catalog's unique index answers 23505.
        if let Err(e) = created {
            let already = e
                .as_database_error()
                .and_then(|d| d.code())
                .is_some_and(|c| c == "42P04" || c == "23505");
            if !already {
                return Err(DbSetupError::Create { name, error: e });
            }
        }
        tracing::info!(database = %name, "created database");
    }
    let _ = conn.close().await;
    Ok(())
}

/// Applies the pending migrations, on a schema newer releases may have
/// migrated further (see [`compatibility`]). The server must first answer
/// a trivial query within `answer_within` (the migrations themselves may
/// take long, and may wait for another instance's: not bounded).
pub async fn migrate(pool: &PgPool, answer_within: Duration) -> Result<(), DbSetupError> {
    check_reachable(pool.connect_options().as_ref(), answer_within).await?;
    compatibility::check_before(pool).await?;
    // Detached: closed after, never handed out again with the session
    // settings and the lock a failed or dropped run may have left on it.
    let mut conn = pool
        .acquire()
        .await
        .map_err(|e| DbSetupError::connect(pool.connect_options().as_ref(), e))?
        .detach();
    migration_locks::run(
        &mut conn,
        &compatibility::tolerant_migrator(),
        migration_locks::LOCK_WAIT,
        migration_locks::PATIENCE,
    )
    .await?;
    let _ = sqlx::Connection::close(conn).await;
    compatibility::check_after(pool).await
}

/// Whether the database `options` names is there, lets this role in and
/// answers a trivial query within `answer_within`, on a connection of its
/// own: a pool that cannot connect says only that it timed out waiting,
/// not why (refused, a password, a role or database that does not exist).
pub async fn check_reachable(
    options: &PgConnectOptions,
    answer_within: Duration,
) -> Result<(), DbSetupError> {
    let answered = faults::deadline(answer_within, async {
        let mut conn = options.connect().await?;
        ping(&mut conn).await?;
        let _ = conn.close().await;
        Ok::<_, sqlx::Error>(())
    })
    .await;
    answered.map_err(|e| match is_missing_database(&e) {
        true => DbSetupError::Missing {
            name: failures::Place::of(options).database().to_owned(),
        },
        false => DbSetupError::connect(options, e),
    })
}

/// A trivial query: whether the server answers.
async fn ping(conn: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT 1 AS "one!""#)
        .fetch_one(conn)
        .await?;
    Ok(())
}

/// True when every embedded migration has been applied successfully.
///
/// Not checkable at build time: `_sqlx_migrations` is the migrator's own
/// table, created when it first runs, not by `migrations/`.
pub async fn migrations_applied(pool: &PgPool) -> Result<bool, sqlx::Error> {
    let applied: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success ORDER BY version")
            .fetch_all(pool)
            .await?;
    Ok(MIGRATOR
        .iter()
        .filter(|m| m.migration_type.is_up_migration())
        .all(|m| applied.contains(&m.version)))
}

#[cfg(test)]
mod login_user_tests {
    use super::{account_of, login_user_for};

    fn no_os_name() -> Option<String> {
        None
    }

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn a_url_without_a_user_connects_as_the_login_name() {
        let url = "postgres://localhost/mcp_connect_dev";
        assert_eq!(
            login_user_for(url, env(&[("USER", "ann")]), no_os_name).as_deref(),
            Some("ann")
        );
        assert_eq!(
            login_user_for(url, env(&[("USER", ""), ("LOGNAME", "bo")]), no_os_name).as_deref(),
            Some("bo")
        );
        assert_eq!(login_user_for(url, env(&[]), no_os_name), None);
        // Neither set: the account the process runs as.
        let os = || Some("svc".to_owned());
        assert_eq!(login_user_for(url, env(&[]), os).as_deref(), Some("svc"));
        assert_eq!(
            login_user_for(url, env(&[("USER", "ann")]), os).as_deref(),
            Some("ann")
        );
    }

    #[test]
    fn the_account_is_read_from_passwd_by_uid() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      broken line\n\
                      ann:x:1000:1000:Ann,,,:/home/ann:/bin/sh\n";
        assert_eq!(account_of(passwd, 1000).as_deref(), Some("ann"));
        assert_eq!(account_of(passwd, 0).as_deref(), Some("root"));
        assert_eq!(account_of(passwd, 4242), None);
        // This process's own account, where Linux shows it.
        if std::path::Path::new("/proc/self").exists() {
            assert!(super::os_login_name().is_some_and(|n| !n.is_empty()));
        }
    }

    #[test]
    fn the_login_name_goes_into_the_url_sqlx_parses() {
        use secrecy::{ExposeSecret, SecretString};
        let named = |url: &str| {
            let url = SecretString::from(url);
            super::with_login_user(&url, env(&[("USER", "ann")]), no_os_name)
                .expose_secret()
                .to_owned()
        };
        assert_eq!(
            named("postgres://localhost/db?sslmode=disable"),
            "postgres://localhost/db?sslmode=disable&user=ann"
        );
        assert_eq!(
            named("postgres://bo@localhost/db"),
            "postgres://bo@localhost/db"
        );
    }

    /// The role and password the child test process is given.
    const CHILD_USER: &str = "pgpass-login";
    // Letters only: the URL sqlx gives it back in percent-encodes the rest.
    const CHILD_PASSWORD: &str = "fromThePasswordFile";
    /// Set for the child process: [`pgpass_in_child`] checks only there.
    const CHILD: &str = "DB_TESTS_PGPASS_CHILD";

    /// A URL without a user connects as the login name, with the password
    /// the password file holds for that name (as `psql` does). sqlx reads
    /// `PGPASSFILE` from the environment, which a test cannot change in its
    /// own process (every other test shares it): the check runs in a child
    /// process of this test binary, given a password file of its own.
    #[test]
    fn a_password_file_line_for_the_login_name_is_used() {
        use std::os::unix::fs::PermissionsExt;
        let home = std::env::temp_dir().join(format!("mcp-connect-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir(&home).unwrap();
        let file = home.join("pgpass");
        let line = format!("localhost:5432:*:{CHILD_USER}:{CHILD_PASSWORD}\n");
        std::fs::write(&file, line).unwrap();
        // sqlx, like libpq, ignores a password file others may read.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "db::login_user_tests::pgpass_in_child",
                "--exact",
                "--ignored",
            ])
            .env(CHILD, "1")
            .env("PGPASSFILE", &file)
            .env("USER", CHILD_USER)
            // No ~/.pgpass of the person running the tests.
            .env("HOME", &home)
            .env_remove("PGUSER")
            .env_remove("PGPASSWORD")
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&home);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains("1 passed"),
            "{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    #[test]
    #[ignore = "run by a_password_file_line_for_the_login_name_is_used, in a process of its own"]
    fn pgpass_in_child() {
        if std::env::var_os(CHILD).is_none() {
            return;
        }
        let url = "postgres://localhost:5432/mcp_connect_dev".to_owned();
        let options = super::connect_options(&url.into()).unwrap();
        assert_eq!(options.get_username(), CHILD_USER);
        let url = sqlx::ConnectOptions::to_url_lossy(&options);
        assert_eq!(url.password(), Some(CHILD_PASSWORD));
    }

    #[test]
    fn a_user_in_the_url_or_pguser_wins() {
        let vars = [("USER", "ann")];
        for url in [
            "postgres://root@localhost/db",
            "postgres://localhost/db?user=root",
        ] {
            assert_eq!(login_user_for(url, env(&vars), no_os_name), None, "{url}");
        }
        let with_pguser = [("USER", "ann"), ("PGUSER", "postgres")];
        assert_eq!(
            login_user_for("postgres://localhost/db", env(&with_pguser), no_os_name),
            None
        );
    }
}
