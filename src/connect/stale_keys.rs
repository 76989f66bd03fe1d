//! Stored tokens sealed by a key this instance's ring lacks (retired while
//! an instance still sealed with it, a key never given to this instance,
//! or one added to the others first during a rolling change). What that
//! says is about this instance, not the row: another instance may hold the
//! key. So a call on such a row fails as retryable and changes nothing
//! (a load balancer's retry may land where the key is), and the log names
//! the key. Start-up and `tokens rekey` name the key ids concerned, so an
//! operator can put the key back — or, for a key that is gone for good,
//! `tokens forget-key` asks those rows' users to connect again and drops
//! the tokens it sealed, after which nothing names the key any more.

use serde_json::json;

use uuid::Uuid;

use super::outbox::{self, Detail};
use crate::{
    config::WebhookEvent,
    connect::ConnectionService,
    db::{
        self,
        audit::{AuditEvent, AuditKind},
        connections::{ConnectionRef, ConnectionRow},
    },
};

/// Key ids that the ring lacks in the rows that still hold tokens, with
/// their row counts: a row whose tokens `forget-key` dropped is done with.
pub async fn missing_keys(state: &ConnectionService) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let counts = stored_key_ids(state).await?;
    Ok(counts
        .into_iter()
        .filter(|(kid, _)| !state.keys.has_key(kid))
        .collect())
}

/// Connections read per statement when their key ids are counted.
const COUNT_PAGE: i64 = 10_000;

/// How many connections hold tokens each key id sealed, by key id: a page
/// of connections per statement, each within the database's deadline (one
/// count over a million rows outlasted the statement time limit, and a
/// frozen database would have held start-up for ever).
async fn stored_key_ids(state: &ConnectionService) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let limit = state.settings.database.deadline();
    let mut counts = std::collections::BTreeMap::<String, i64>::new();
    let mut walk = db::page::Walk::new(COUNT_PAGE);
    while let Some(after) = walk.next_after() {
        let page = db::connections::count_by_key_id(&state.db, after, walk.limit());
        for (key_id, rows) in walk.past(db::faults::deadline(limit, page).await?) {
            *counts.entry(key_id).or_default() += rows;
        }
    }
    Ok(counts.into_iter().collect())
}

/// Key ids that the ring lacks in the revocations still owed, with their
/// row counts: an instance without the key counts a failed attempt and
/// leaves them to the others, until their retry window ends.
pub async fn missing_revocation_keys(
    state: &ConnectionService,
) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let counts = db::faults::deadline(
        state.settings.database.deadline(),
        db::pending_revocations::count_by_key_id(&state.db),
    )
    .await?;
    Ok(counts
        .into_iter()
        .filter(|(kid, _)| !state.keys.has_key(kid))
        .collect())
}

/// Logs a warning naming the key ids stored rows use that the ring lacks.
pub async fn warn_about_missing_keys(state: &ConnectionService) {
    match missing_revocation_keys(state).await {
        Ok(missing) if !missing.is_empty() => {
            let rows: i64 = missing.iter().map(|(_, n)| n).sum();
            let key_ids: Vec<&str> = missing.iter().map(|(kid, _)| kid.as_str()).collect();
            tracing::warn!(
                "{rows} revocation(s) still owed are sealed by key ids the ring lacks ({}); an instance without the key leaves them to the others until their retry window ends (add the keys back to MCP_CONNECT_KEYS to have them tried, or run `tokens forget-key` for a key gone for good)",
                key_ids.join(", ")
            );
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "cannot check the key ids of revocations still owed"),
    }
    match missing_keys(state).await {
        Ok(missing) if !missing.is_empty() => {
            let rows: i64 = missing.iter().map(|(_, n)| n).sum();
            let key_ids: Vec<&str> = missing.iter().map(|(kid, _)| kid.as_str()).collect();
            tracing::warn!(
                "{rows} stored connection(s) are sealed by key ids the ring lacks ({}); calls on them fail here until those keys are added back to MCP_CONNECT_KEYS (for a key gone for good, `mcp-connect tokens forget-key KEY_ID` asks their users to connect again)",
                key_ids.join(", ")
            );
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "cannot check the key ids of stored connections"),
    }
    tracing::debug!(
        public_url = %state.settings.public_url,
        "checked the key ids of stored connections"
    );
}

/// A call reached a connection sealed by a key this instance's ring lacks.
#[derive(Debug, thiserror::Error)]
#[error(
    "connection {connection} is sealed by key id {key_id}, which this instance's MCP_CONNECT_KEYS lacks"
)]
pub struct KeyMissing {
    pub connection: Uuid,
    pub key_id: String,
}

impl KeyMissing {
    pub fn of(row: &ConnectionRow) -> Self {
        Self {
            connection: row.id,
            key_id: row.key_id.clone(),
        }
    }
}

/// What `tokens forget-key` did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Forgotten {
    /// Active connections sealed by the key: asked to connect again.
    pub marked: u64,
    /// Active connections sealed by the key that could not be marked (a
    /// database error, logged): the command is to be run again.
    pub failed: u64,
    /// Connections that need their users again (those just marked among
    /// them) whose tokens sealed by the key were dropped now.
    pub dropped: u64,
    /// Connections whose tokens sealed by the key an earlier run dropped,
    /// still waiting for their users.
    pub dropped_before: i64,
    /// Revocations still owed whose tokens the key sealed: nothing can
    /// open them any more, so they were given up (and audited so).
    pub revocations_dropped: u64,
}

impl Forgotten {
    /// What the command says it did with key `key_id`, one line each.
    pub fn report(&self, key_id: &str) -> Vec<String> {
        let mut lines = Vec::new();
        if self.marked > 0 {
            lines.push(format!(
                "{} connection(s) sealed by key {key_id} now ask their users to connect again",
                self.marked
            ));
        }
        if self.dropped > 0 {
            lines.push(format!(
                "the tokens key {key_id} sealed were dropped from {} connection(s) that need their users again",
                self.dropped
            ));
        }
        if self.revocations_dropped > 0 {
            lines.push(format!(
                "{} revocation(s) still owed, sealed by key {key_id}, were given up: their access \
                 may stay live at the provider until it expires or the person removes it",
                self.revocations_dropped
            ));
        }
        if lines.is_empty() && self.dropped_before > 0 {
            lines.push(format!(
                "key {key_id} was forgotten already: {} connection(s) it sealed wait for their users to connect again; nothing to do",
                self.dropped_before
            ));
        }
        if lines.is_empty() {
            lines.push(format!(
                "no connection is sealed by key {key_id}: nothing to do (is the key id right?)"
            ));
        }
        lines
    }
}

/// What `tokens forget-key` would change, shown before it does (without
/// `--yes`).
#[derive(Debug, PartialEq, Eq)]
pub struct WouldForget {
    /// Connections holding tokens the key sealed (working ones, and those
    /// already waiting for their users).
    pub connections: i64,
    /// Revocations still owed whose tokens the key sealed.
    pub revocations: i64,
}

impl WouldForget {
    /// Whether forgetting the key would change anything.
    pub fn changes_anything(&self) -> bool {
        self.connections > 0 || self.revocations > 0
    }

    /// What the command says it would do with key `key_id`, one line each.
    pub fn report(&self, key_id: &str) -> Vec<String> {
        let mut lines = Vec::new();
        if self.connections > 0 {
            lines.push(format!(
                "key {key_id} seals the tokens of {} connection(s): forgetting it drops them, and the users of \
                 those still in use must connect again",
                self.connections
            ));
        }
        if self.revocations > 0 {
            lines.push(format!(
                "key {key_id} seals the tokens of {} revocation(s) still owed: forgetting it gives them up, \
                 and their access may stay live at the provider until it expires or the person removes it",
                self.revocations
            ));
        }
        if lines.is_empty() {
            lines.push(format!(
                "no connection or revocation still owed holds tokens sealed by key {key_id}: nothing to do \
                 (is the key id right?)"
            ));
        }
        lines
    }
}

/// What [`forget_key`] would change, changing nothing. Refused as it is
/// while the ring holds the key.
pub async fn would_forget(state: &ConnectionService, key_id: &str) -> anyhow::Result<WouldForget> {
    refuse_a_key_in_the_ring(state, key_id)?;
    let of_key = |counts: Vec<(String, i64)>| {
        counts
            .into_iter()
            .find(|(kid, _)| kid == key_id)
            .map_or(0, |(_, n)| n)
    };
    Ok(WouldForget {
        connections: of_key(stored_key_ids(state).await?),
        revocations: of_key(db::pending_revocations::count_by_key_id(&state.db).await?),
    })
}

fn refuse_a_key_in_the_ring(state: &ConnectionService, key_id: &str) -> anyhow::Result<()> {
    if state.keys.has_key(key_id) {
        anyhow::bail!(
            "key {key_id} is in MCP_CONNECT_KEYS: its tokens open; run `tokens rekey` to re-seal them instead"
        );
    }
    Ok(())
}

/// Connections looked at per statement when a forgotten key's users are
/// asked to connect again and its tokens dropped: a few milliseconds each.
const PAGE: i64 = 1000;

/// For a key that is gone for good: asks the users of every active
/// connection sealed by `key_id` to connect again (marked `needs_reauth`,
/// with its webhook event and audit row), then drops the tokens the key
/// sealed from every connection that needs its user, so that no row waits
/// for the key any more (start-up and `tokens rekey` stop naming it).
/// Refused while the ring holds the key, whose rows open. Run again, it
/// finds nothing left to do, and says so.
pub async fn forget_key(state: &ConnectionService, key_id: &str) -> anyhow::Result<Forgotten> {
    refuse_a_key_in_the_ring(state, key_id)?;
    let mut done = Forgotten {
        dropped_before: db::connections::count_dropped_of(&state.db, key_id).await?,
        ..Forgotten::default()
    };
    // Page by page, each committed: a run cut short keeps what it marked,
    // and the next goes on with the rest.
    let mut walk = db::page::Walk::new(PAGE);
    while let Some(after) = walk.next_after() {
        let page = db::connections::active_sealed_by(&state.db, key_id, after, PAGE).await?;
        let sealed = walk.past(page);
        if !sealed.is_empty() {
            mark_page(state, key_id, &sealed, &mut done).await?;
        }
    }
    // A row still active keeps its tokens until it is marked: the next run
    // marks it, then drops them with the others.
    if done.failed == 0 {
        let mut walk = db::page::Walk::new(PAGE);
        while let Some(after) = walk.next_after() {
            let page =
                db::connections::drop_tokens_sealed_by(&state.db, key_id, after, PAGE).await?;
            done.dropped += walk.past(page);
        }
    }
    done.revocations_dropped = super::vault::forget_revocations_sealed_by(state, key_id).await?;
    Ok(done)
}

/// Asks the users of a page's active connections sealed by the forgotten
/// key `key_id` (`sealed`) to connect again: those no other transaction
/// holds in one transaction, with their events and audit rows (one at a
/// time, a million rows took hours); a row a refresh under way holds, once
/// it is free, alone.
async fn mark_page(
    state: &ConnectionService,
    key_id: &str,
    sealed: &[Uuid],
    done: &mut Forgotten,
) -> anyhow::Result<()> {
    let marked = match mark_free(state, key_id, sealed).await {
        Ok(marked) => marked,
        Err(e) => {
            tracing::error!(error = %e, key_id, connections = sealed.len(), "cannot mark a page of connections sealed by a forgotten key");
            done.failed += sealed.len() as u64;
            return Ok(());
        }
    };
    done.marked += marked.len() as u64;
    let marked: std::collections::HashSet<Uuid> = marked.iter().map(|c| c.id).collect();
    for &id in sealed.iter().filter(|id| !marked.contains(id)) {
        // The row as it is now (waiting for the transaction that held it);
        // marking compares its sealed token, so a row re-sealed or
        // reconnected meanwhile is left. One held past the lock timeout
        // is counted, and the run goes on: the next one marks it.
        let row = match row_when_free(state, id).await {
            Ok(row) => row,
            Err(e) => {
                tracing::error!(error = %e, connection = %id, "cannot mark a connection sealed by a forgotten key");
                done.failed += 1;
                continue;
            }
        };
        let Some(row) = row else { continue };
        if row.key_id != key_id || row.status != db::connections::ConnectionStatus::Active {
            continue;
        }
        match mark_unreadable(state, &row, "key_forgotten").await {
            Ok(true) => done.marked += 1,
            Ok(false) => {}
            Err(_) => done.failed += 1,
        }
    }
    Ok(())
}

/// Connection `id` once no other transaction holds it (or its lock wait
/// failed), within the database's deadline.
async fn row_when_free(
    state: &ConnectionService,
    id: Uuid,
) -> Result<Option<ConnectionRow>, sqlx::Error> {
    db::faults::deadline(state.settings.database.deadline(), async {
        let mut tx = crate::db::transaction::begin(&state.db).await?;
        let row = db::connections::find_for_update(&mut *tx, id).await?;
        tx.commit().await?;
        Ok(row)
    })
    .await
}

/// The connections of `ids` still active, sealed by `key_id` and held by
/// no other transaction, marked `needs_reauth` in one transaction with
/// their webhook events and audit rows: the rows it marked.
async fn mark_free(
    state: &ConnectionService,
    key_id: &str,
    ids: &[Uuid],
) -> Result<Vec<ConnectionRef>, sqlx::Error> {
    let mut tx = crate::db::transaction::begin(&state.db).await?;
    let marked = db::connections::mark_needs_reauth_sealed_by(&mut *tx, key_id, ids).await?;
    outbox::record_many(
        state,
        &mut tx,
        WebhookEvent::ConnectionReauthRequired,
        &marked,
        Detail::Reason("token_unreadable"),
    )
    .await?;
    let audited: Vec<_> = marked
        .iter()
        .map(|c| {
            let detail =
                json!({ "connection_id": c.id, "key_id": key_id, "reason": "key_forgotten" });
            (c.user(), c.provider.as_str(), detail)
        })
        .collect();
    db::audit::record_many(&mut *tx, AuditKind::TokenUnreadable, &audited).await?;
    tx.commit().await?;
    if !marked.is_empty() {
        tracing::warn!(
            key_id,
            connections = marked.len(),
            "stored tokens sealed by a forgotten key; their users must connect again"
        );
    }
    Ok(marked)
}

/// The connection's token does not open: marks it `needs_reauth` (unless
/// it changed meanwhile) and audits why.
/// Whether this call marked it.
pub async fn unreadable(
    state: &ConnectionService,
    row: &ConnectionRow,
    reason: &'static str,
) -> bool {
    matches!(mark_unreadable(state, row, reason).await, Ok(true))
}

/// As [`unreadable`], with the error that kept it from marking the row.
async fn mark_unreadable(
    state: &ConnectionService,
    row: &ConnectionRow,
    reason: &'static str,
) -> Result<bool, sqlx::Error> {
    // Not waiting for a refresh claimed meanwhile: an instance that holds
    // this key id holds the same material, so a refresh cannot open the
    // tokens either (for a forgotten key, no instance holds it). Other
    // material under the same key id would be a mistake this cannot tell
    // from damaged bytes.
    let marked = super::vault::mark_needs_reauth(
        state,
        row.id,
        &row.access_token,
        "token_unreadable",
        false,
    )
    .await;
    match &marked {
        Ok(marked) => tracing::warn!(
            connection = %row.id,
            key_id = %row.key_id,
            reason,
            marked,
            "stored token does not open; the user must connect again"
        ),
        Err(e) => {
            tracing::error!(error = %e, connection = %row.id, "cannot mark an unreadable connection")
        }
    }
    db::audit::record_or_log(
        &state.db,
        state.settings.database.deadline(),
        AuditEvent::new(AuditKind::TokenUnreadable)
            .user(row.user())
            .provider(&row.provider)
            .detail(json!({ "connection_id": row.id, "key_id": row.key_id, "reason": reason })),
    )
    .await;
    marked
}
