//! dev's database: its URL checked, the password files Postgres clients
//! would ignore named, the database created and migrated, and a failure
//! told in the terms of a developer's machine (`PGPASSWORD`, `~/.pgpass`,
//! `createuser`), as the README's "The two commands" tells them.

use std::{
    ffi::OsString,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use anyhow::anyhow;
use secrecy::{ExposeSecret, SecretString};
use sqlx::{PgPool, postgres::PgConnectOptions};

use crate::db::{
    self, DbSetupError,
    failures::{Place, Refusal, Said, refusal},
};

/// Checked as `serve` checks `database_url`, and before anything connects
/// with it: a URL without a database would have dev create and migrate
/// the one named after the role (`postgres`, for the superuser).
pub(super) fn check_url(url: &SecretString) -> anyhow::Result<()> {
    crate::config::check_database_url(url.expose_secret())
        .map_err(|m| anyhow!("--database-url / DATABASE_URL {m}"))
}

/// The options to connect with, and where that is (for messages).
pub(super) fn options(url: &SecretString) -> anyhow::Result<(PgConnectOptions, Place)> {
    check_url(url)?;
    let options =
        db::connect_options(url).map_err(|e| anyhow!("--database-url / DATABASE_URL: {e}"))?;
    let place = Place::of(&options);
    Ok((options, place))
}

/// Creates the database if missing, and migrates it.
pub(super) async fn prepare(
    options: PgConnectOptions,
    place: &Place,
    password_files: &PasswordFiles,
) -> anyhow::Result<PgPool> {
    db::create_database_if_missing(&options, db::ANSWER_WITHIN)
        .await
        .map_err(|e| explained(e, place, password_files))?;
    let pool = db::pool(options, 2);
    if let Err(e) = db::migrate(&pool, db::ANSWER_WITHIN).await {
        pool.close().await;
        return Err(explained(e, place, password_files)
            .context(format!("cannot migrate the dev database {place}")));
    }
    // Also for --json, which prints no banner.
    tracing::info!(database = %place, "dev database ready");
    Ok(pool)
}

/// The password files a Postgres client reads — `PGPASSFILE`, then
/// `~/.pgpass` — that sqlx, like libpq, ignores because others may read
/// them, with their modes. Looked for only when a password would come from
/// one (neither the URL nor `PGPASSWORD` gives it). Only the files'
/// permissions are read, never what they hold.
#[derive(Debug, Default)]
pub(super) struct PasswordFiles {
    ignored: Vec<(String, PathBuf, u32)>,
}

impl PasswordFiles {
    pub(super) fn check(url: &SecretString) -> Self {
        Self::check_with(url, |name| std::env::var_os(name))
    }

    fn check_with(url: &SecretString, env: impl Fn(&str) -> Option<OsString>) -> Self {
        let url_password = url::Url::parse(url.expose_secret())
            .is_ok_and(|u| u.password().is_some_and(|p| !p.is_empty()));
        if url_password || env("PGPASSWORD").is_some() {
            return Self::default();
        }
        let files = [
            env("PGPASSFILE").map(|f| ("PGPASSFILE".to_owned(), PathBuf::from(f))),
            env("HOME").map(|home| ("~/.pgpass".to_owned(), Path::new(&home).join(".pgpass"))),
        ];
        let ignored = files
            .into_iter()
            .flatten()
            .filter_map(|(name, path)| {
                let mode = std::fs::metadata(&path).ok()?.permissions().mode();
                (mode & 0o077 != 0).then_some((name, path, mode & 0o777))
            })
            .collect();
        Self { ignored }
    }

    /// One warning per ignored file.
    pub(super) fn warn(&self) {
        for line in self.sentences() {
            tracing::warn!("{line}");
        }
    }

    fn sentences(&self) -> Vec<String> {
        self.ignored
            .iter()
            .map(|(name, path, mode)| {
                let path = path.display();
                format!(
                    "the password file {path} ({name}) is not read: others may read it \
                     (mode {mode:o}), and Postgres clients ignore such a file; `chmod 600 {path}`"
                )
            })
            .collect()
    }
}

/// `e`, told for a developer running `dev` or `dev token`: what Postgres
/// refused and what to do about it.
pub(super) fn explained(e: DbSetupError, place: &Place, files: &PasswordFiles) -> anyhow::Error {
    let DbSetupError::Connect { error, .. } = &e else {
        if let DbSetupError::Create { error, .. } = &e
            && refusal(error) == Some(Refusal::NoPrivilege)
        {
            let (user, database, server) = (place.user(), place.database(), place.server());
            return anyhow!(
                "dev cannot create its database {database}: user {user} may not create \
                 databases on {server} ({}). Let it (`sudo -u postgres psql -c 'ALTER ROLE \
                 \"{user}\" CREATEDB'`), or create the database for it (`sudo -u postgres \
                 createdb -O {user} {database}`)",
                Said(error)
            );
        }
        return anyhow::Error::new(e);
    };
    let (server, user) = (place.server(), place.user());
    let said = Said(error);
    match refusal(error) {
        Some(Refusal::Password) => {
            let mut told = format!(
                "Postgres on {server} refused user {user} ({said}): the password is wrong or \
                 missing, or the role does not exist. dev takes the password from \
                 --database-url / DATABASE_URL, else PGPASSWORD, else a line \
                 `{}` in ~/.pgpass (mode 0600; PGPASSFILE names another file). Or make \
                 yourself a role with `sudo -u postgres createuser --createdb --pwprompt \
                 \"$USER\"` (README.md, \"The two commands\").",
                pgpass_line(place)
            );
            for sentence in files.sentences() {
                told.push(' ');
                told.push_str(&capitalized(&sentence));
                told.push('.');
            }
            anyhow!(told)
        }
        Some(Refusal::NoSuchRole) => anyhow!(
            "Postgres on {server} has no role {user} ({said}): make it with `sudo -u postgres \
             createuser --createdb {user}`, or connect as another role (--database-url \
             postgres://ROLE@HOST/DATABASE, or PGUSER)"
        ),
        Some(Refusal::NotAllowed) => anyhow!(
            "Postgres on {server} does not let user {user} in ({said}): allow it in \
             pg_hba.conf, or connect another way, e.g. over the local socket: --database-url \
             'postgres:///mcp_connect_dev?host=/var/run/postgresql' (README.md, \"The two commands\")"
        ),
        _ => anyhow!(
            "cannot reach Postgres for the dev database {place}: {said}. Is Postgres running \
             there? (--database-url or DATABASE_URL names another database)"
        ),
    }
}

/// The `~/.pgpass` line that gives `place`'s role its password, as sqlx
/// looks it up (host and port as the URL names them).
fn pgpass_line(place: &Place) -> String {
    let (host, port) = place.host_and_port();
    format!("{host}:{port}:*:{}:PASSWORD", place.user())
}

fn capitalized(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn file_with_mode(dir: &Path, name: &str, mode: u32) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, "127.0.0.1:5432:*:ann:hunter2\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn a_password_file_others_may_read_is_named_without_its_contents() {
        let dir = std::env::temp_dir().join(format!("mcp-connect-pgpass-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let loose = file_with_mode(&dir, "loose", 0o644);
        file_with_mode(&dir, ".pgpass", 0o600);
        let vars: HashMap<&str, OsString> = [
            ("PGPASSFILE", loose.clone().into_os_string()),
            ("HOME", dir.clone().into_os_string()),
        ]
        .into();
        let env = |name: &str| vars.get(name).cloned();
        let url = SecretString::from("postgres://ann@127.0.0.1:5432/dev");
        let files = PasswordFiles::check_with(&url, env);
        let said = files.sentences().join("\n");
        assert!(
            said.contains(&loose.display().to_string()) && said.contains("mode 644"),
            "{said}"
        );
        assert_eq!(files.sentences().len(), 1, "the 0600 file is fine: {said}");
        assert!(!said.contains("hunter2"), "{said}");

        // With a password given, no file is read: nothing to say.
        let with_password = SecretString::from("postgres://ann:pw@127.0.0.1:5432/dev");
        assert!(
            PasswordFiles::check_with(&with_password, env)
                .sentences()
                .is_empty()
        );
        let with_pgpassword = |name: &str| match name {
            "PGPASSWORD" => Some(OsString::from("pw")),
            _ => vars.get(name).cloned(),
        };
        assert!(
            PasswordFiles::check_with(&url, with_pgpassword)
                .sentences()
                .is_empty()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_pgpass_line_names_the_host_port_and_role() {
        let options =
            db::connect_options(&"postgres://ann@db.example:5433/dev".to_owned().into()).unwrap();
        assert_eq!(
            pgpass_line(&Place::of(&options)),
            "db.example:5433:*:ann:PASSWORD"
        );
    }
}
