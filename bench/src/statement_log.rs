//! The SQL statements sqlx runs in this process, gathered as it logs them
//! (`sqlx::query` events: the service's connections log every statement at
//! trace), for code of the service that the harness runs itself rather
//! than through a server: the sweeper. Only for the future it wraps
//! ([`gather`]): nothing else in the harness logs, and once it is done
//! sqlx's statement events are switched off again.

use std::{
    future::Future,
    sync::{Arc, Mutex},
};

use tracing::{
    Dispatch, Event, Metadata, Subscriber,
    field::{Field, Visit},
    instrument::WithSubscriber,
    span,
};

/// Runs `work`, and returns its output with the statements it ran, each
/// once, in order of first appearance.
pub async fn gather<T>(work: impl Future<Output = T>) -> (T, Vec<String>) {
    let log = Statements::default();
    let seen = log.0.clone();
    let out = work.with_subscriber(Dispatch::new(log)).await;
    // The dispatcher has gone: without this, sqlx would go on building
    // every statement's event (its summary, a copy of the SQL) for no one.
    tracing::callsite::rebuild_interest_cache();
    let statements = std::mem::take(&mut *seen.lock().unwrap_or_else(|e| e.into_inner()));
    (out, statements)
}

#[derive(Default)]
struct Statements(Arc<Mutex<Vec<String>>>);

impl Subscriber for Statements {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target() == "sqlx::query"
    }

    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }

    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}

    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}

    fn event(&self, event: &Event<'_>) {
        if event.metadata().target() != "sqlx::query" {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        // sqlx puts the whole statement in `db.statement` only when its
        // one-line `summary` shortened it.
        let sql = [fields.statement, fields.summary]
            .into_iter()
            .map(|s| s.trim().to_owned())
            .find(|s| !s.is_empty());
        if let Some(sql) = sql {
            let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if !seen.contains(&sql) {
                seen.push(sql);
            }
        }
    }

    fn enter(&self, _: &span::Id) {}

    fn exit(&self, _: &span::Id) {}
}

#[derive(Default)]
struct Fields {
    summary: String,
    statement: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "summary" => value.clone_into(&mut self.summary),
            "db.statement" => value.clone_into(&mut self.statement),
            _ => {}
        }
    }

    // sqlx records both as strings; its other fields are not needed.
    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

#[cfg(test)]
mod tests {
    use super::gather;

    #[tokio::test]
    async fn the_statements_logged_inside_are_gathered_once_each_whole() {
        let ((), statements) = gather(async {
            let short = "SELECT 1";
            tracing::debug!(target: "sqlx::query", summary = short, db.statement = "");
            tracing::debug!(target: "sqlx::query", summary = short, db.statement = "");
            tracing::trace!(
                target: "sqlx::query",
                summary = "delete from audit_events where …",
                db.statement = "\n\nDELETE FROM audit_events WHERE at < $1\n"
            );
            tracing::info!(target: "mcp_connect::sweeper", summary = "not a statement");
        })
        .await;
        assert_eq!(
            statements,
            ["SELECT 1", "DELETE FROM audit_events WHERE at < $1"]
        );
    }

    #[tokio::test]
    async fn what_another_thread_logs_meanwhile_is_not_gathered() {
        let ((), statements) = gather(async {
            std::thread::spawn(|| {
                tracing::debug!(target: "sqlx::query", summary = "SELECT 2", db.statement = "");
            })
            .join()
            .unwrap();
            tracing::debug!(target: "sqlx::query", summary = "SELECT 3", db.statement = "");
        })
        .await;
        assert_eq!(statements, ["SELECT 3"]);
    }
}
