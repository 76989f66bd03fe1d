//! Stored tokens sealed by a key this instance's ring lacks (retired while
//! an instance still sealed with it, or a key never given to this
//! instance). Such a token cannot be used: the connection needs the user
//! to connect again, which is audited. Start-up and `tokens rekey` name
//! the key ids concerned, so an operator can put the key back instead.

use serde_json::json;

use crate::{
    connect::ConnectionService,
    db::{
        self,
        audit::{AuditEvent, AuditKind},
        connections::ConnectionRow,
    },
};

/// Key ids in stored rows that the ring lacks, with their row counts.
pub async fn missing_keys(state: &ConnectionService) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let counts = db::connections::count_by_key_id(&state.db).await?;
    Ok(counts
        .into_iter()
        .filter(|(kid, _)| !state.keys.has_key(kid))
        .collect())
}

/// Logs a warning naming the key ids stored rows use that the ring lacks.
pub async fn warn_about_missing_keys(state: &ConnectionService) {
    let checked = missing_keys(state).await;
    tracing::debug!("checked the key ids of stored connections");
    match checked {
        Ok(missing) if !missing.is_empty() => {
            let rows: i64 = missing.iter().map(|(_, n)| n).sum();
            let key_ids: Vec<&str> = missing.iter().map(|(kid, _)| kid.as_str()).collect();
            tracing::warn!(
                "{rows} stored connection(s) are sealed by key ids the ring lacks ({}); their users must connect again unless those keys are added back to MCP_CONNECT_KEYS",
                key_ids.join(", ")
            );
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "cannot check the key ids of stored connections"),
    }
}

/// The connection's token does not open: marks it `needs_reauth` (unless
/// it changed meanwhile) and audits why.
pub async fn unreadable(state: &ConnectionService, row: &ConnectionRow, reason: &'static str) {
    let marked =
        super::vault::mark_needs_reauth(state, row.id, &row.access_token, "token_unreadable").await;
    match marked {
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
        AuditEvent::new(AuditKind::TokenUnreadable)
            .user(row.user())
            .provider(&row.provider)
            .detail(json!({ "connection_id": row.id, "key_id": row.key_id, "reason": reason })),
    )
    .await;
}
