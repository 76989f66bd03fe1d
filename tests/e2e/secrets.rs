//! The one-time values and credentials a scenario saw — bearer tokens,
//! tickets, requestStates, cookies, and the codes and tokens the peers say
//! they issued — and the checks that none of them was written to a log of
//! the run or stored in clear in the server's database.

use anyhow::bail;
use sqlx::Row;

use crate::world::World;

/// Values shorter than this would match by accident.
const MIN_LEN: usize = 16;

#[derive(Default)]
pub struct Secrets {
    seen: Vec<(String, String)>,
}

impl Secrets {
    pub fn add(&mut self, what: &str, value: &str) {
        if value.len() >= MIN_LEN && !self.seen.iter().any(|(_, v)| v == value) {
            self.seen.push((what.to_owned(), value.to_owned()));
        }
    }

    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Adds all of `other`'s.
    pub fn extend(&mut self, other: &Secrets) {
        for (what, value) in &other.seen {
            self.add(what, value);
        }
    }

    /// Every log file of the run but chromedriver's (the test's own driver,
    /// which records the URLs it is told to open).
    pub fn check_logs(&self, world: &World) -> anyhow::Result<()> {
        let mut found = Vec::new();
        let mut files: Vec<_> = std::fs::read_dir(&world.logs)?
            .flatten()
            .map(|e| e.path())
            .collect();
        files.sort();
        for path in files {
            if path.file_name().is_some_and(|n| n == "chromedriver.log") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            for (what, value) in &self.seen {
                if let Some(line) = text.lines().find(|l| l.contains(value.as_str())) {
                    let shown = line.replace(value.as_str(), "<REDACTED>");
                    found.push(format!(
                        "{what} in {}: {}",
                        path.display(),
                        shown.chars().take(300).collect::<String>()
                    ));
                }
            }
        }
        if !found.is_empty() {
            bail!("secrets found in logs:\n  {}", found.join("\n  "));
        }
        Ok(())
    }

    /// Every row of the server's tables, as JSON text (byte columns as hex).
    pub async fn check_database(&self, world: &World) -> anyhow::Result<()> {
        let mut db = world.db().await?;
        let tables: Vec<String> = sqlx::query(
            "SELECT tablename::text FROM pg_tables WHERE schemaname = 'public' AND tablename NOT LIKE '\\_sqlx%'",
        )
        .fetch_all(&mut db)
        .await?
        .iter()
        .map(|r| r.get::<String, _>(0))
        .collect();
        let mut found = Vec::new();
        for table in tables {
            let rows: Vec<String> = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT row_to_json(t)::text FROM \"{table}\" t"
            )))
            .fetch_all(&mut db)
            .await?
            .iter()
            .map(|r| r.get::<String, _>(0))
            .collect();
            for (what, value) in &self.seen {
                if rows.iter().any(|r| r.contains(value.as_str())) {
                    found.push(format!("{what} in table {table}"));
                }
            }
        }
        if !found.is_empty() {
            bail!("secrets stored in clear:\n  {}", found.join("\n  "));
        }
        Ok(())
    }
}
