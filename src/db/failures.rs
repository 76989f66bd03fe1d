//! How a failure to reach Postgres, or to be let in, is told: where (the
//! database, its server and role, never the password), whether Postgres
//! refused the login or could not be reached at all, and what Postgres
//! said, without the line of Postgres's own source code that sqlx
//! appends to its message ("… at line 334").

use std::fmt;

use sqlx::postgres::PgConnectOptions;

/// A database, its server and the role connecting to it, for messages:
/// `mcp_connect on db.internal:5432 (user app)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    database: String,
    host: String,
    port: u16,
    /// The directory of the Unix socket, when it is one.
    socket: Option<String>,
    user: String,
}

impl Place {
    pub fn of(options: &PgConnectOptions) -> Self {
        Self {
            // As Postgres does when the URL names none.
            database: options
                .get_database()
                .unwrap_or(options.get_username())
                .to_owned(),
            host: options.get_host().to_owned(),
            port: options.get_port(),
            socket: options.get_socket().map(|dir| dir.display().to_string()),
            user: options.get_username().to_owned(),
        }
    }

    /// `host:port`, or the socket's directory.
    pub fn server(&self) -> String {
        match &self.socket {
            Some(dir) => dir.clone(),
            None => format!("{}:{}", self.host, self.port),
        }
    }

    /// The host and port a password file's line is matched against
    /// (`localhost` and the port for a socket).
    pub fn host_and_port(&self) -> (&str, u16) {
        (&self.host, self.port)
    }

    pub fn user(&self) -> &str {
        &self.user
    }

    pub fn database(&self) -> &str {
        &self.database
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} on {} (user {})",
            self.database,
            self.server(),
            self.user
        )
    }
}

/// Why Postgres turned a connection away, when it did (rather than not
/// answering).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A password was asked for and the one given (or none) was wrong
    /// (28P01). Under `scram-sha-256` a role that does not exist is
    /// refused the same way: Postgres does not tell which.
    Password,
    /// The role does not exist (28000, said so where no password is asked).
    NoSuchRole,
    /// `pg_hba.conf` or the role's own settings let it not in (28000:
    /// no entry for the host, peer or ident failed, not allowed to log in).
    NotAllowed,
    /// The database does not exist (3D000).
    NoSuchDatabase,
    /// The role may not do what was asked (42501: `CREATE DATABASE`
    /// without `CREATEDB`).
    NoPrivilege,
}

/// The [`Refusal`] `e` is, if it is one.
pub fn refusal(e: &sqlx::Error) -> Option<Refusal> {
    let d = e.as_database_error()?;
    let code = d.code()?;
    match code.as_ref() {
        "28P01" => Some(Refusal::Password),
        "28000" if d.message().contains("does not exist") => Some(Refusal::NoSuchRole),
        "28000" => Some(Refusal::NotAllowed),
        "3D000" => Some(Refusal::NoSuchDatabase),
        "42501" => Some(Refusal::NoPrivilege),
        _ => None,
    }
}

/// What went wrong, as Postgres or the network said it: Postgres's own
/// message (without sqlx's "error returned from database:" and the line
/// of Postgres's source code), the operating system's for a connection
/// (`Connection refused (os error 111)`), sqlx's otherwise.
pub struct Said<'a>(pub &'a sqlx::Error);

impl fmt::Display for Said<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            sqlx::Error::Database(d) => f.write_str(d.message()),
            sqlx::Error::Io(e) => write!(f, "{e}"),
            e => write!(f, "{e}"),
        }
    }
}

/// The message of [`super::DbSetupError::Connect`]: what happened, and
/// for a refused login what to change, in the service's terms (`dev`
/// says it in its own).
pub(super) fn connect_failure(place: &Place, e: &sqlx::Error) -> String {
    let refused = format!(
        "Postgres refused the login to database {place}: {}",
        Said(e)
    );
    match refusal(e) {
        Some(Refusal::Password) => format!(
            "{refused}: the password is wrong or missing (give it in database_url, \
             percent-encoded, or, with none there, in PGPASSWORD or ~/.pgpass), or the role \
             does not exist (Postgres does not say which)"
        ),
        Some(Refusal::NoSuchRole) => format!(
            "{refused}: create the role (`createuser {}`), or name an existing one in \
             database_url",
            place.user
        ),
        Some(Refusal::NotAllowed) => format!(
            "{refused}: Postgres's pg_hba.conf (and the role's LOGIN attribute) must let this \
             role in from this host"
        ),
        Some(Refusal::NoSuchDatabase) => format!(
            "database {place} does not exist: create it (`createdb -O {} {}`), or name an \
             existing one in database_url",
            place.user, place.database
        ),
        // Postgres answered, with an error of its own.
        Some(Refusal::NoPrivilege) | None if e.as_database_error().is_some() => {
            format!("Postgres refused database {place}: {}", Said(e))
        }
        _ => format!("cannot reach Postgres for database {place}: {}", Said(e)),
    }
}

/// The message of [`super::DbSetupError::Migrate`]: sqlx's, with what
/// Postgres said told as [`Said`] tells it.
pub(super) fn migration_failure(e: &sqlx::migrate::MigrateError) -> String {
    use sqlx::migrate::MigrateError;
    match e {
        MigrateError::Execute(e) => Said(e).to_string(),
        MigrateError::ExecuteMigration(e, version) => format!("migration {version}: {}", Said(e)),
        e => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(url: &str) -> PgConnectOptions {
        super::super::connect_options(&url.to_owned().into()).unwrap()
    }

    #[test]
    fn a_place_is_named_without_its_password() {
        let place = Place::of(&options("postgres://ann:hunter2@db.example:5433/devdb"));
        assert_eq!(place.to_string(), "devdb on db.example:5433 (user ann)");
        let place = Place::of(&options(
            "postgres://ann@localhost/app?host=/var/run/postgresql",
        ));
        assert_eq!(place.to_string(), "app on /var/run/postgresql (user ann)");
    }

    #[test]
    fn what_the_network_said_is_told_without_sqlx_s_wrapping() {
        let refused = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(Said(&refused).to_string(), "connection refused");
        let place = Place::of(&options("postgres://ann:hunter2@db.example:5433/devdb"));
        let told = connect_failure(&place, &refused);
        assert!(
            told.starts_with("cannot reach Postgres for database devdb on db.example:5433"),
            "{told}"
        );
        assert!(!told.contains("hunter2"), "{told}");
        assert_eq!(refusal(&refused), None);
    }

    /// Postgres answered: a database that does not exist is named as
    /// such, not as a server that cannot be reached.
    #[tokio::test]
    async fn a_missing_database_is_told_as_missing() {
        use sqlx::Connection;
        let server = std::env::var("TEST_DATABASE_SERVER")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned());
        let name = format!("mcp_connect_missing_{}", uuid::Uuid::new_v4().simple());
        let options = server.parse::<PgConnectOptions>().unwrap().database(&name);
        let Err(e) = sqlx::PgConnection::connect_with(&options).await else {
            panic!("no such database");
        };
        assert_eq!(refusal(&e), Some(Refusal::NoSuchDatabase));
        let told = connect_failure(&Place::of(&options), &e);
        assert!(told.starts_with(&format!("database {name} on ")), "{told}");
        assert!(told.contains("does not exist: create it"), "{told}");
        assert!(!told.contains("cannot reach"), "{told}");
    }
}
