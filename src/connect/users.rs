//! Who has connections (`mcp-connect users list`), what an operator sees
//! of one person, and removing them (`users show` / `users remove`): for
//! audits, for offboarding someone who left, or erasing a person's data
//! on request.
//!
//! Removal ends the person's browser sign-ins first (their unfinished
//! OAuth flows go with them, so no connect completes meanwhile) and
//! deletes their connect tickets, then disconnects every connection as
//! the person would: revoked at the provider where it offers revocation,
//! `connection.deleted` sent to the webhooks, a `disconnected` audit row
//! each. One `user_removed` audit row records what was done. Audit rows
//! about the person stay until `audit.retention_days`; events already
//! queued for the webhooks are still delivered. A revocation the provider
//! failed stays owed, and the running service tries it again for
//! `revocation.retry_hours`: it protects the person, so removing them
//! keeps it. Signing in again at the
//! identity provider starts afresh: disable the person there first.

use std::fmt;

use serde_json::json;

use super::{ConnectionService, vault::Revocation};
use crate::{
    db::{
        self,
        audit::{AuditEvent, AuditKind},
        client_grants::Grant,
        connections::{ConnectionSummary, Person},
    },
    domain::{ProviderName, UserRef},
};

/// People with connections, a page at a time: see
/// [`db::connections::people`].
pub async fn list(
    state: &ConnectionService,
    issuer: &str,
    provider: Option<&ProviderName>,
    after: &str,
    limit: i64,
) -> Result<Vec<Person>, sqlx::Error> {
    let provider = provider.map(ProviderName::as_str);
    db::connections::people(&state.db, issuer, provider, after, limit).await
}

/// A connect that completes while the connections are being deleted adds
/// one more: the list is read again, this many times at most.
const ROUNDS: usize = 3;

/// What is kept about one person. Never a token.
#[derive(Debug)]
pub struct UserRecord {
    pub connections: Vec<ConnectionSummary>,
    pub grants: Vec<Grant>,
    /// Unexpired browser sign-ins, not idle for too long.
    pub sessions: i64,
    /// Connect tickets that could still be redeemed.
    pub live_tickets: i64,
    /// Rows of sign-ins and tickets beside those (expired, idle, used,
    /// declined): kept a while, and deleted with the person.
    pub spent: i64,
    /// Rows of connects under way that have no account yet (removed with
    /// the rest).
    pub unfinished: usize,
}

/// Reads what is kept about `user`.
pub async fn record(
    state: &ConnectionService,
    user: UserRef<'_>,
) -> Result<UserRecord, sqlx::Error> {
    let connections = db::connections::list_for_user(&state.db, user).await?;
    let rows = db::connections::all_of_user(&state.db, user).await?;
    let idle = state.settings.web.session_idle();
    let (sessions, all_sessions) = db::web_sessions::count_for_user(&state.db, user, idle).await?;
    let (live_tickets, all_tickets) = db::tickets::count_for_user(&state.db, user).await?;
    Ok(UserRecord {
        unfinished: rows.len().saturating_sub(connections.len()),
        connections,
        grants: db::client_grants::list_for_user(&state.db, user).await?,
        sessions,
        live_tickets,
        spent: (all_sessions - sessions) + (all_tickets - live_tickets),
    })
}

impl UserRecord {
    pub fn is_empty(&self) -> bool {
        self.connections.is_empty()
            && self.unfinished == 0
            && self.sessions == 0
            && self.live_tickets == 0
            && self.spent == 0
    }
}

/// Stored text for a terminal: as it is when every character may be
/// shown, else quoted with escapes (a subject or account label from
/// outside must not move the cursor or recolour an operator's terminal).
pub fn for_terminal(text: &str) -> String {
    if text.chars().all(crate::domain::shown_text::is_shown) {
        text.to_owned()
    } else {
        format!("{text:?}")
    }
}

/// One line per connection, with the clients allowed to use it, then the
/// sign-ins and tickets.
impl fmt::Display for UserRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "connections: {}", self.connections.len())?;
        for c in &self.connections {
            let last_used = c
                .last_used_at
                .map(|at| at.format("%Y-%m-%d %H:%M UTC").to_string())
                .unwrap_or_else(|| "never".to_owned());
            let clients: Vec<String> = self
                .grants
                .iter()
                .filter(|g| g.connection_id == c.id)
                .map(|g| for_terminal(&g.client_id))
                .collect();
            writeln!(
                f,
                "  {} {} ({}) {}: connected {}, last used {}, clients: {}",
                c.provider,
                for_terminal(&c.account_label),
                for_terminal(&c.account_id),
                c.status,
                c.created_at.format("%Y-%m-%d %H:%M UTC"),
                last_used,
                if clients.is_empty() {
                    "none".to_owned()
                } else {
                    clients.join(", ")
                },
            )?;
        }
        if self.unfinished > 0 {
            writeln!(
                f,
                "  and {} connect(s) under way, no account yet",
                self.unfinished
            )?;
        }
        writeln!(f, "signed in on {} browser(s)", self.sessions)?;
        write!(f, "{} connect link(s) not yet used", self.live_tickets)?;
        if self.spent > 0 {
            write!(
                f,
                "\n{} ended sign-in(s) and used or expired link(s), kept a while",
                self.spent
            )?;
        }
        Ok(())
    }
}

/// What removing a person did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Removed {
    /// Connections deleted.
    pub connections: u64,
    /// Of those, revoked at the provider.
    pub revoked: u64,
    /// Of those, at a provider that offers revocation but refused it or
    /// could not be reached: the access may still be live there. The
    /// service tries again for `revocation.retry_hours`.
    pub retrying: u64,
    /// Of those, at a provider that offers revocation, whose tokens could
    /// not be read here (their key is not on the ring): the access may
    /// still be live there, until its tokens expire or the person removes
    /// it at the provider.
    pub not_revoked: u64,
    /// Of those, not revoked on purpose: someone else here connected the
    /// same account, at a provider where revoking would end theirs too.
    pub shared: u64,
    /// Providers of deleted connections that this configuration does not
    /// name, so nothing could be revoked there yet: the command was run
    /// without the service's configuration. Their revocations are owed,
    /// for the service's instances to try.
    pub unconfigured: Vec<ProviderName>,
    /// Revocations owed at those providers, for the service's instances
    /// that name them to try.
    pub owed_elsewhere: u64,
    /// Browser sign-ins ended.
    pub sessions: u64,
    /// Connect tickets deleted.
    pub tickets: u64,
}

/// Removes `user`: see the module's documentation. Run again after an
/// error; what was done stays done, and is on the record: the
/// `user_removed` row is written either way, with `complete` false when
/// the removal stopped part-way.
pub async fn remove(state: &ConnectionService, user: UserRef<'_>) -> anyhow::Result<Removed> {
    let mut removed = Removed::default();
    let done = remove_rows(state, user, &mut removed).await;
    let recorded = db::audit::record(
        &state.db,
        AuditEvent::new(AuditKind::UserRemoved)
            .user(user)
            .detail(json!({
                "connections": removed.connections,
                "revoked_upstream": removed.revoked,
                "revocations_retried": removed.retrying + removed.owed_elsewhere,
                "not_revoked": removed.not_revoked,
                "kept_for_shared_accounts": removed.shared,
                "sessions": removed.sessions,
                "tickets": removed.tickets,
                "complete": done.is_ok(),
            })),
    )
    .await;
    done?;
    recorded?;
    Ok(removed)
}

/// The deletions of [`remove`], counted into `removed` as they happen.
async fn remove_rows(
    state: &ConnectionService,
    user: UserRef<'_>,
    removed: &mut Removed,
) -> anyhow::Result<()> {
    removed.sessions = db::web_sessions::delete_for_user(&state.db, user).await?;
    removed.tickets = db::tickets::delete_for_user(&state.db, user).await?;
    for round in 0..=ROUNDS {
        let owned = db::connections::all_of_user(&state.db, user).await?;
        if owned.is_empty() {
            break;
        }
        anyhow::ensure!(
            round < ROUNDS,
            "{} connection(s) were added while the others were deleted (the person is still \
             connecting accounts): disable them at the identity provider and run this again",
            owned.len()
        );
        for c in owned {
            let configured = state.providers.get(&c.provider).is_some();
            let revocation =
                super::vault::disconnect_account(state, user, &c.provider, Some(c.id)).await?;
            // `None`: gone meanwhile (the person disconnected it).
            let Some(revocation) = revocation else {
                continue;
            };
            removed.connections += 1;
            if !configured && !removed.unconfigured.contains(&c.provider) {
                removed.unconfigured.push(c.provider.clone());
            }
            match revocation {
                Revocation::Revoked => removed.revoked += 1,
                // Owed, for the instances that name the provider: told
                // under `unconfigured`.
                Revocation::Retrying if !configured => removed.owed_elsewhere += 1,
                Revocation::Retrying => removed.retrying += 1,
                Revocation::Failed => removed.not_revoked += 1,
                Revocation::Shared => removed.shared += 1,
                Revocation::NotOffered => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::for_terminal;

    #[test]
    fn text_a_terminal_would_act_on_is_quoted_with_escapes() {
        assert_eq!(for_terminal("octo-cat"), "octo-cat");
        assert_eq!(for_terminal("Zoë 山田"), "Zoë 山田");
        assert_eq!(for_terminal("a\u{1b}[31mred"), "\"a\\u{1b}[31mred\"");
        assert_eq!(for_terminal("exe.\u{202e}gpj"), "\"exe.\\u{202e}gpj\"");
    }
}
