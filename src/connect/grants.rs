//! Per-client grants: a connection serves only the MCP clients its user
//! allowed to use it. The client that connected an account is granted by
//! the consent given in that flow; any other client of the same user is
//! sent, by URL elicitation, to a short approval page on this server (a
//! ticket like a connect link's, with no provider round trip), and its
//! retry completes once the user allowed it. The client that connected a
//! new account is granted by that consent; connecting an account already
//! connected here grants nothing (the person chose it at the provider, not
//! on a page naming it). `grants = "per_user"` turns the check off.

use crate::domain::UserRef;
use rmcp::{ErrorData, model::ElicitationAction};
use uuid::Uuid;

use super::{
    Access, ClientKind, Need, UsableToken, answer_with_link, current_ticket, elicit, events,
    input_key, internal,
    outbox::{self, Detail},
    response_action, take_link, tickets,
};
use crate::{
    config::{GrantMode, WebhookEvent},
    connect::ConnectionService,
    connect::state::RoundState,
    db::{self, call_accounts::GrantUse, tickets::Ticket},
    providers::Provider,
};

/// What the caller already knows of the calling client's grant on the
/// token's connection.
pub(super) enum GrantSeen {
    /// Nothing yet: look it up.
    Unread,
    /// Read with the connection (`db::call_accounts`); `None`: no grant.
    Read(Option<GrantUse>),
}

/// Whether the calling client may go on with a connection.
pub(super) enum Gate<'s> {
    Pass,
    /// The question to the user, or their answer to an earlier one.
    Answer(Access<'s>),
    /// The connection was deleted while the retry waited for its approval
    /// (the user disconnected it instead): there is nothing to approve.
    Gone,
}

/// Hands out `token` if the calling client may use its connection;
/// otherwise asks the user (or reports their answer to an earlier ask).
/// `None`: the connection was deleted while the retry waited for its
/// approval; the caller asks the user to connect.
pub(super) async fn admit<'s>(
    state: &'s ConnectionService,
    need: &Need<'_>,
    provider: &'s Provider,
    token: UsableToken,
    round: Option<&RoundState>,
    seen: GrantSeen,
) -> Result<Option<Access<'s>>, ErrorData> {
    Ok(
        match gate(state, need, provider, token.connection_id, round, seen).await? {
            Gate::Pass => Some(Access::Ready { token, provider }),
            Gate::Answer(access) => Some(access),
            Gate::Gone => None,
        },
    )
}

/// [`admit`] before any token is opened: whether the calling client may
/// use `connection` at all, else the question for the user.
pub(super) async fn gate<'s>(
    state: &'s ConnectionService,
    need: &Need<'_>,
    provider: &'s Provider,
    connection: Uuid,
    round: Option<&RoundState>,
    seen: GrantSeen,
) -> Result<Gate<'s>, ErrorData> {
    let p = need.principal;
    if state.settings.grants == GrantMode::PerUser
        || granted(state, connection, &p.client_id, seen).await?
    {
        return Ok(Gate::Pass);
    }
    // The approval ticket of the previous round, if it was one for this
    // connection.
    let ticket = current_ticket(state, round)
        .await?
        .filter(|t| t.connection_id == Some(connection));
    let declined = |t: &Option<Ticket>| t.as_ref().is_some_and(|t| t.declined_at.is_some());
    let declined_answer = || {
        Gate::Answer(Access::ApprovalDenied {
            provider_name: provider.display_name().to_owned(),
        })
    };
    if declined(&ticket) {
        return Ok(declined_answer());
    }
    // A 2025-11-25 client's retry names no round: a Deny on its latest
    // approval link is its answer while that link would have lived, as on
    // the connections page, rather than a new link at every call.
    if round.is_none() && need.client == ClientKind::Legacy {
        let latest = db::faults::deadline(
            state.settings.database.deadline(),
            db::tickets::latest_approval(&state.db, p.user(), &p.client_id, connection),
        )
        .await
        .map_err(internal)?;
        if declined(&latest) {
            return Ok(declined_answer());
        }
    }
    let accepted = round.is_some()
        && response_action(need.input_responses, &input_key(provider.name()))
            == Some(ElicitationAction::Accept);
    let ticket = if accepted && ticket.is_some() {
        // The user says they are done: wait for the grant, announced by
        // whichever instance stored it. Subscribed before looking again,
        // so an approval in between is not missed.
        let mut rx = state.events.subscribe();
        let unread = || GrantSeen::Unread;
        if granted(state, connection, &p.client_id, unread()).await?
            || (super::wait_for_connection(state, p, provider.name(), &mut rx, need.cancel).await
                && granted(state, connection, &p.client_id, unread()).await?)
        {
            return Ok(Gate::Pass);
        }
        // Deleted meanwhile, its approval tickets with it: no new one can
        // name it.
        let limit = state.settings.database.deadline();
        let found = db::connections::find_summary_for_user(&state.db, p.user(), connection);
        let found = db::faults::deadline(limit, found).await.map_err(internal)?;
        if found.is_none() {
            return Ok(Gate::Gone);
        }
        let again = current_ticket(state, round)
            .await?
            .filter(|t| t.connection_id == Some(connection));
        if declined(&again) {
            return Ok(declined_answer());
        }
        again
    } else {
        ticket
    };
    ask(state, need, provider, connection, round, ticket).await
}

impl ConnectionService {
    /// The user's connections as the calling client may see them, each
    /// with whether that client is approved for it (every one in `per_user`
    /// mode). Listing them is no use of them, but an unapproved client is
    /// told no more than that they exist (see `tools::connections_list`).
    pub async fn list_for_client(
        &self,
        user: UserRef<'_>,
        client_id: &str,
    ) -> Result<Vec<(db::connections::ConnectionSummary, bool)>, sqlx::Error> {
        let rows = self.list(user).await?;
        if self.settings.grants == GrantMode::PerUser {
            return Ok(rows.into_iter().map(|row| (row, true)).collect());
        }
        let limit = self.settings.database.deadline();
        let granted: std::collections::HashSet<Uuid> =
            db::faults::deadline(limit, db::client_grants::list_for_user(&self.db, user))
                .await?
                .into_iter()
                .filter(|g| g.client_id == client_id)
                .map(|g| g.connection_id)
                .collect();
        Ok(rows
            .into_iter()
            .map(|row| {
                let approved = granted.contains(&row.id);
                (row, approved)
            })
            .collect())
    }

    /// Whether the calling client may act on connection `connection_id`
    /// (every grant mode): for operations that use a connection without a
    /// token handed out, such as disconnecting it.
    pub async fn client_may_use(
        &self,
        connection_id: Uuid,
        client_id: &str,
    ) -> Result<bool, ErrorData> {
        Ok(self.settings.grants == GrantMode::PerUser
            || granted(self, connection_id, client_id, GrantSeen::Unread).await?)
    }
}

/// Whether `client_id` may use the connection; notes the use (at most once
/// a minute) when it may.
async fn granted(
    state: &ConnectionService,
    connection_id: Uuid,
    client_id: &str,
    seen: GrantSeen,
) -> Result<bool, ErrorData> {
    let limit = state.settings.database.deadline();
    let found = match seen {
        GrantSeen::Read(grant) => grant,
        GrantSeen::Unread => db::faults::deadline(
            limit,
            state.hot_db.run(async |conn| {
                db::client_grants::last_use(conn, connection_id, client_id).await
            }),
        )
        .await
        .map_err(internal)?,
    };
    let Some(grant) = found else {
        return Ok(false);
    };
    // By the database's clock, which wrote `last_used_at`: an instance
    // whose own is ahead would note every use, one behind none for as long.
    let stale = grant
        .last_used_at
        .is_none_or(|at| at < grant.read_at - chrono::Duration::minutes(1));
    if stale {
        db::faults::deadline(
            limit,
            state
                .hot_db
                .run(async |conn| db::client_grants::touch(conn, connection_id, client_id).await),
        )
        .await
        .map_err(internal)?;
    }
    Ok(true)
}

/// Sends the user to the approval page: the same link while its ticket
/// lives, a new one after. [`Gate::Gone`] when the connection was deleted
/// since it was read.
async fn ask<'s>(
    state: &'s ConnectionService,
    need: &Need<'_>,
    provider: &Provider,
    connection: Uuid,
    round: Option<&RoundState>,
    ticket: Option<Ticket>,
) -> Result<Gate<'s>, ErrorData> {
    let p = need.principal;
    if let ClientKind::Modern {
        url_elicitation: false,
        ..
    } = need.client
    {
        return ask_on_the_connections_page(state, need, provider, connection).await;
    }
    let reusable = match (round, ticket) {
        (
            Some(RoundState {
                ticket: Some(sealed),
                ..
            }),
            Some(t),
        ) if t.usable() => Some((t.id, sealed.secret.clone())),
        _ => None,
    };
    let link = match reusable {
        Some(found) => found,
        None => {
            take_link(state, p)?;
            let issued =
                tickets::issue_approval(state, p.user(), &p.client_id, provider.name(), connection)
                    .await
                    .map_err(internal)?;
            let Some(t) = issued else {
                // The call asks to connect instead, with a link of its own.
                state.link_limit.give_back(p.user());
                return Ok(Gate::Gone);
            };
            (t.id, t.secret)
        }
    };
    let client = state.client_names.describe(&p.client_id).await;
    let message = elicit::approval_message(provider, client.shown());
    answer_with_link(state, need, provider, round, link, message).map(Gate::Answer)
}

/// For a client that cannot open links: its request waits on the
/// connections page (an approval ticket like a link's, which only the
/// signed-in person can answer there), and the error tells the user to go
/// there. One ticket while it lives, however often the client calls; a
/// Deny there is the client's answer for as long.
async fn ask_on_the_connections_page<'s>(
    state: &'s ConnectionService,
    need: &Need<'_>,
    provider: &Provider,
    connection: Uuid,
) -> Result<Gate<'s>, ErrorData> {
    let p = need.principal;
    let latest = db::faults::deadline(
        state.settings.database.deadline(),
        db::tickets::latest_approval(&state.db, p.user(), &p.client_id, connection),
    )
    .await
    .map_err(internal)?;
    match latest {
        Some(t) if t.declined_at.is_some() => {
            return Ok(Gate::Answer(Access::ApprovalDenied {
                provider_name: provider.display_name().to_owned(),
            }));
        }
        Some(_) => {}
        None => {
            take_link(state, p)?;
            let issued =
                tickets::issue_approval(state, p.user(), &p.client_id, provider.name(), connection)
                    .await
                    .map_err(internal)?;
            if issued.is_none() {
                state.link_limit.give_back(p.user());
                return Ok(Gate::Gone);
            }
        }
    }
    let client = state.client_names.describe(&p.client_id).await;
    Err(elicit::approval_on_the_connections_page(
        state,
        provider,
        client.shown(),
    ))
}

/// What allowing a client did.
pub enum Allowed {
    /// The grant is stored; `created`: by this answer (not there already,
    /// as when two approval links of one client were both allowed).
    Granted { created: bool },
    /// The ticket was used, declined or expired meanwhile.
    TicketGone,
    /// The connection is gone (disconnected meanwhile).
    ConnectionGone,
}

/// The user allowed the ticket's client on its connection (approval page,
/// Allow): redeems the ticket and stores the grant in one transaction, then
/// wakes the client's waiting retry on whichever instance it is.
pub async fn allow(
    state: &ConnectionService,
    user: UserRef<'_>,
    ticket: &Ticket,
) -> anyhow::Result<Allowed> {
    let Some(connection_id) = ticket.connection_id else {
        return Ok(Allowed::TicketGone);
    };
    let mut tx = crate::db::transaction::begin(&state.db).await?;
    // The connection first, then the ticket: a disconnect locks the
    // connection and then deletes its tickets (the cascade), so taking
    // them the other way round could leave each waiting for the other.
    let Some(connection) =
        db::connections::find_summary_for_user_to_reference(&mut *tx, user, connection_id).await?
    else {
        return Ok(Allowed::ConnectionGone);
    };
    if db::tickets::redeem(&mut *tx, ticket.id, user)
        .await?
        .is_none()
    {
        return Ok(Allowed::TicketGone);
    }
    let created = db::client_grants::insert(&mut *tx, connection_id, &ticket.client_id).await?;
    if created {
        outbox::record(
            state,
            &mut tx,
            WebhookEvent::GrantCreated,
            connection_id,
            Detail::Client(&ticket.client_id),
        )
        .await?;
    }
    events::notify(&mut *tx, &state.keys, user, &connection.provider).await?;
    tx.commit().await?;
    Ok(Allowed::Granted { created })
}

/// Grants the client that connected an account (inside the transaction
/// that stores the connection). The site's own web client is not an MCP
/// client: a connection made from the connections page starts with no
/// grant, and the first MCP client is asked.
pub(crate) async fn grant_connecting_client(
    state: &ConnectionService,
    exec: &mut sqlx::PgConnection,
    connection_id: Uuid,
    client_id: &str,
) -> Result<(), sqlx::Error> {
    if state.settings.auth.web_client_id.as_deref() == Some(client_id) {
        return Ok(());
    }
    if db::client_grants::insert(&mut *exec, connection_id, client_id).await? {
        outbox::record(
            state,
            exec,
            WebhookEvent::GrantCreated,
            connection_id,
            Detail::Client(client_id),
        )
        .await?;
    }
    Ok(())
}

/// "Remove access" on the connections page, with its event, in one
/// transaction. The connection stays.
pub async fn remove(
    state: &ConnectionService,
    user: UserRef<'_>,
    connection_id: Uuid,
    client_id: &str,
) -> anyhow::Result<bool> {
    let mut tx = crate::db::transaction::begin(&state.db).await?;
    let removed =
        db::client_grants::delete_for_user(&mut *tx, user, connection_id, client_id).await?;
    if removed {
        outbox::record(
            state,
            &mut tx,
            WebhookEvent::GrantRemoved,
            connection_id,
            Detail::Client(client_id),
        )
        .await?;
    }
    tx.commit().await?;
    Ok(removed)
}
