//! The connection service: the one place that decides, for a request that
//! needs a user's account at a provider, whether there is a usable token or
//! the user must connect first — and, across the rounds of a Multi
//! Round-Trip Request, what the client's retry means. Tools stay thin: they
//! ask [`ConnectionService::require`] and act on the [`Access`] they get.

pub mod accounts;
pub mod authorization_refusal;
use authorization_refusal::AuthorizationRefusal;
pub mod clients;
pub mod credentials;
pub mod elicit;
pub mod errors;
pub mod events;
pub mod flows;
pub mod grants;
pub mod link_limit;
pub mod locks;
mod outbox;
mod round;
mod service;
pub mod stale_keys;
pub mod state;
pub mod tickets;
mod user_pages;
pub mod users;
pub mod vault;

use crate::domain::ProviderName;
use errors::RequestError;
pub(crate) use errors::internal;

use std::time::Duration;

use rmcp::{
    ErrorData,
    model::{ElicitationAction, InputRequiredResult, InputResponses},
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use self::state::{Binding, RoundState, RoundTicket};
use crate::{
    auth::Principal,
    config::GrantMode,
    db::{
        self,
        audit::{AuditEvent, AuditKind},
        connections::ConnectionStatus,
        tickets::Ticket,
    },
    providers::Provider,
};
pub use round::{Retry, Round};
pub use service::{ConnectedAccount, ConnectionService, Drain, Parts};
pub use vault::{TokenState, UsableToken};

/// What the client can do with a URL elicitation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    /// 2026-07-28: MRTR; whether it declared `elicitation.url`, and
    /// `elicitation.form` (an empty `elicitation` counts as form).
    Modern {
        url_elicitation: bool,
        form_elicitation: bool,
    },
    /// 2025-11-25 and before: `-32042` URLElicitationRequiredError.
    Legacy,
}

/// One request's need for an account.
pub struct Need<'a> {
    pub principal: &'a Principal,
    pub provider: &'a str,
    /// Scopes the call needs, beyond what the connection has anyway; the
    /// provider's defaults are asked for whenever the user is sent to the
    /// provider, but not required of an existing connection.
    pub scopes: &'a [String],
    /// Which of several accounts at the provider (label or account id);
    /// `None`: the only one, or ask.
    pub account: Option<&'a str>,
    /// Connect another account (`connect {another_account: true}`).
    pub add_account: bool,
    pub binding: Binding<'a>,
    pub input_responses: Option<&'a InputResponses>,
    pub request_state: Option<&'a str>,
    pub client: ClientKind,
    pub cancel: &'a CancellationToken,
}

/// The outcome for the tool.
pub enum Access<'s> {
    Ready {
        token: UsableToken,
        provider: &'s Provider,
    },
    /// Answer the request with this: the user must act first.
    InputRequired(InputRequiredResult),
    /// The user declined to connect.
    Declined { provider_name: String },
    /// The user did not allow the calling client to use their account
    /// (Deny on the approval page): connected, but not for this client.
    ApprovalDenied { provider_name: String },
    /// The user cancelled; calling again starts over.
    Cancelled { provider_name: String },
    /// The provider refused the authorization the user was sent to give,
    /// with its `error` code (not the user's own decline); `refusal` says
    /// what it means.
    AuthorizationRefused {
        provider_name: String,
        code: String,
        refusal: AuthorizationRefusal,
    },
    /// The token has expired and the provider could not renew it now.
    ProviderUnavailable { provider_name: String },
    /// The token has expired and the provider refuses to renew it without
    /// saying the grant is dead.
    RefreshRefused {
        provider_name: String,
        refusal: vault::Refusal,
    },
    /// The user has several accounts at the provider and the client cannot
    /// be asked which (the `account` argument is the label of several, or
    /// a 2025-11-25 client named none): `message` tells the model which
    /// there are and to name one.
    AccountAmbiguous { message: String },
    /// Another account was asked for, and the user has as many at the
    /// provider as `flow.accounts_per_provider` allows: refused before a
    /// link is made (a new one would be refused once granted, leaving a
    /// grant to revoke). `message` says to disconnect one first.
    AccountLimitReached { message: String },
}

/// The answer for a connect ticket whose authorization the provider
/// refused (`refused_with`), if it was. An `invalid_scope` is the call's
/// to change when it asks for scopes of its own (the retry repeats the
/// call's arguments), else the operator's: the ticket's scopes cannot
/// tell, as a reconnect's carry the connection's, spelled as the provider
/// granted them.
fn authorization_refused<'s>(
    provider: &Provider,
    need: &Need<'_>,
    ticket: &Ticket,
) -> Option<Access<'s>> {
    let code = ticket.refused_with.clone()?;
    let defaults = provider.default_scopes();
    let asked_for_more = need.scopes.iter().any(|s| !defaults.contains(s));
    Some(Access::AuthorizationRefused {
        provider_name: provider.display_name().to_owned(),
        refusal: AuthorizationRefusal::of(&code, asked_for_more),
        code,
    })
}

/// The inputRequests key of a provider's connect elicitation.
pub fn input_key(provider: &str) -> String {
    format!("connect_{provider}")
}

async fn require<'s>(
    state: &'s ConnectionService,
    need: Need<'_>,
) -> Result<Access<'s>, ErrorData> {
    let provider = state
        .providers
        .get(need.provider)
        .ok_or_else(|| unknown_provider(state, need.provider))?;
    // A key grants what it grants: there are no scopes to ask an API-key or
    // Basic provider for, nor to upgrade. What a connection must have for
    // this call is what the call asks for; the provider's defaults are
    // asked for with it whenever the user is sent to the provider
    // (`tickets::requested_scopes`), but a connection whose user declined
    // one of them (Strava lets them untick it) still serves the calls that
    // do not need it, instead of asking again for ever.
    let wanted = if !provider.is_oauth() {
        Vec::new()
    } else {
        need.scopes.to_vec()
    };
    let p = need.principal;

    let key = input_key(provider.name());
    let round = state
        .open_round(Retry {
            principal: need.principal,
            binding: &need.binding,
            request_state: need.request_state,
            input_responses: need.input_responses,
            provider: provider.name(),
            key: &key,
        })
        .await?;
    // An answer counts only to the question the round asked: a round that
    // showed a link asked this key, an account question another
    // (mrtr.mdx: what the server did not ask for is ignored).
    let action = round
        .as_ref()
        .filter(|r| r.state.ticket.is_some())
        .and_then(Round::action);
    match action {
        Some(ElicitationAction::Decline) => {
            return Ok(Access::Declined {
                provider_name: provider.display_name().to_owned(),
            });
        }
        Some(ElicitationAction::Cancel) => {
            return Ok(Access::Cancelled {
                provider_name: provider.display_name().to_owned(),
            });
        }
        _ => {}
    }
    let round = round.map(|r| r.state);
    if need.add_account {
        return accounts::add(state, &need, provider, &wanted, round.as_ref()).await;
    }
    // Subscribed before the read, so a connection stored after it is
    // not missed by the wait below.
    let accepted = action == Some(ElicitationAction::Accept);
    let mut subscription = accepted.then(|| state.events.subscribe());
    let read = accounts::read(state, p, provider).await?;
    let chosen = match accounts::choose(state, &need, provider, round.as_ref(), &read)? {
        accounts::Chosen::Connection(id) => id,
        accounts::Chosen::Answer(access) => return Ok(access),
    };
    // Later rounds remember the choice.
    let mut round = round.map(|r| RoundState {
        account: chosen,
        ..r
    });
    let (mut row, grant) = accounts::pick(read, chosen);
    let mut seen = grants::GrantSeen::Read(grant);
    // A connection the calling client was never approved for: the user is
    // asked before its token is opened or refreshed, so such a client
    // causes no refresh, no "last used" and no reauth marking.
    if let Some(r) = row
        .as_ref()
        .filter(|r| r.status == ConnectionStatus::Active)
        && matches!(seen, grants::GrantSeen::Read(None))
        && state.settings.grants != GrantMode::PerUser
    {
        let unseen = grants::GrantSeen::Read(None);
        match grants::gate(state, &need, provider, r.id, round.as_ref(), unseen).await? {
            grants::Gate::Answer(access) => return Ok(access),
            // Approved while the retry waited: looked up again below.
            grants::Gate::Pass => seen = grants::GrantSeen::Unread,
            // Disconnected instead, while the retry waited: the user is
            // asked to connect, without waiting a second time.
            grants::Gate::Gone => {
                row = None;
                subscription = None;
                round = round.map(|r| RoundState { account: None, ..r });
            }
        }
    }
    let existing_scopes = match checked(vault::token_state(state, row, provider, &wanted).await)? {
        Checked::Ready(token) => {
            match grants::admit(state, &need, provider, token, round.as_ref(), seen).await? {
                Some(access) => return Ok(access),
                // Disconnected while the retry waited for its approval:
                // the next round names no account (it is gone).
                None => {
                    subscription = None;
                    round = round.map(|r| RoundState { account: None, ..r });
                    Vec::new()
                }
            }
        }
        Checked::Ask { existing_scopes } => existing_scopes,
        Checked::RenewalFailed(failure) => return Ok(failure.answer(provider)),
    };
    // Not (yet) connected. Did the user press Cancel on our consent page, or
    // Deny at the provider? (Only asked now: a connected retry needs no
    // look at the ticket.)
    let declined =
        |ticket: &Option<Ticket>| ticket.as_ref().is_some_and(|t| t.declined_at.is_some());
    // Or the provider refused it: said once, not answered with another
    // link that would fail the same way.
    let refused =
        |ticket: &Option<Ticket>| authorization_refused(provider, &need, ticket.as_ref()?);
    // An approval ticket of an earlier round is no answer to "connect".
    let connect_ticket =
        |ticket: Option<Ticket>| ticket.filter(|t: &Ticket| t.connection_id.is_none());
    let mut ticket = connect_ticket(current_ticket(state, round.as_ref()).await?);
    if declined(&ticket) {
        return Ok(Access::Declined {
            provider_name: provider.display_name().to_owned(),
        });
    }
    if let Some(refused) = refused(&ticket) {
        return Ok(refused);
    }
    if let Some(rx) = subscription.as_mut() {
        // The user said they are done; the callback may still be on its
        // way. Wait for it, woken by whichever instance stores it.
        if wait_for_connection(state, p, provider.name(), rx, need.cancel).await {
            // The call named an account there was none of: the account
            // stored now is chosen as a retry would choose it (the named
            // one, or the user asked), never taken for it unasked.
            let chosen = match (chosen, need.account) {
                (None, Some(_)) => {
                    let read = accounts::read(state, p, provider).await?;
                    match accounts::choose(state, &need, provider, round.as_ref(), &read)? {
                        accounts::Chosen::Connection(id) => id,
                        accounts::Chosen::Answer(access) => return Ok(access),
                    }
                }
                (chosen, _) => chosen,
            };
            let seen = grants::GrantSeen::Unread;
            if let Checked::Ready(token) = check(state, p, provider, chosen, &wanted).await?
                && let Some(access) =
                    grants::admit(state, &need, provider, token, round.as_ref(), seen).await?
            {
                return Ok(access);
            }
        }
        ticket = connect_ticket(current_ticket(state, round.as_ref()).await?);
        if declined(&ticket) {
            return Ok(Access::Declined {
                provider_name: provider.display_name().to_owned(),
            });
        }
        if let Some(refused) = refused(&ticket) {
            return Ok(refused);
        }
    }
    ask(
        state,
        &need,
        provider,
        &wanted,
        &existing_scopes,
        round.as_ref(),
        ticket,
    )
    .await
}

/// The ticket of the previous round, if there was one.
pub(crate) async fn current_ticket(
    state: &ConnectionService,
    round: Option<&RoundState>,
) -> Result<Option<Ticket>, ErrorData> {
    match round.and_then(|r| r.ticket.as_ref()) {
        Some(t) => {
            let find = state
                .hot_db
                .run(async |conn| db::tickets::find_by_id(conn, t.id).await);
            db::faults::deadline(state.settings.database.deadline(), find)
                .await
                .map_err(internal)
        }
        None => Ok(None),
    }
}

enum Checked {
    Ready(UsableToken),
    Ask {
        existing_scopes: Vec<String>,
    },
    /// Connected, but the token's renewal failed: the answer to the call.
    RenewalFailed(RenewalFailure),
}

/// Why a connected account's expired token could not be renewed.
enum RenewalFailure {
    /// The provider cannot renew it now.
    Unavailable,
    /// The provider refuses to renew it.
    Refused(vault::Refusal),
}

impl RenewalFailure {
    /// The call's answer, whoever the client.
    fn answer<'s>(self, provider: &Provider) -> Access<'s> {
        let provider_name = provider.display_name().to_owned();
        match self {
            RenewalFailure::Unavailable => Access::ProviderUnavailable { provider_name },
            RenewalFailure::Refused(refusal) => Access::RefreshRefused {
                provider_name,
                refusal,
            },
        }
    }
}

/// Reads the connection and checks its token (when the call's one read is
/// out of date: after a wait for the user, or a new account stored).
async fn check(
    state: &ConnectionService,
    p: &Principal,
    provider: &Provider,
    connection: Option<uuid::Uuid>,
    wanted: &[String],
) -> Result<Checked, ErrorData> {
    checked(vault::usable_token_of(state, p.user(), provider, connection, wanted).await)
}

fn checked(found: anyhow::Result<TokenState>) -> Result<Checked, ErrorData> {
    match found.map_err(internal)? {
        TokenState::Usable(token) => Ok(Checked::Ready(token)),
        TokenState::LacksScopes { granted } => Ok(Checked::Ask {
            existing_scopes: granted,
        }),
        // Connecting again does not lose the scopes the old grant had.
        TokenState::NeedsReauth { granted } => Ok(Checked::Ask {
            existing_scopes: granted,
        }),
        TokenState::Missing => Ok(Checked::Ask {
            existing_scopes: Vec::new(),
        }),
        TokenState::ProviderUnavailable => Ok(Checked::RenewalFailed(RenewalFailure::Unavailable)),
        TokenState::RefreshRefused(refusal) => {
            Ok(Checked::RenewalFailed(RenewalFailure::Refused(refusal)))
        }
    }
}

async fn ask<'s>(
    state: &'s ConnectionService,
    need: &Need<'_>,
    provider: &Provider,
    wanted: &[String],
    existing_scopes: &[String],
    round: Option<&RoundState>,
    ticket: Option<Ticket>,
) -> Result<Access<'s>, ErrorData> {
    let p = need.principal;
    if let ClientKind::Modern {
        url_elicitation: false,
        ..
    } = need.client
    {
        return Err(elicit::missing_url_capability(state, provider));
    }
    // An upgrade asks for what the user has plus what is wanted, so the new
    // grant does not lose scopes the old one had; and always for the
    // provider's defaults.
    let mut scopes: Vec<String> = existing_scopes.to_vec();
    for s in &tickets::with_defaults(provider, wanted) {
        if !scopes.contains(s) {
            scopes.push(s.clone());
        }
    }
    // The same link while its ticket lives; a new one after.
    let reusable = match (round, ticket) {
        (
            Some(RoundState {
                ticket: Some(sealed),
                ..
            }),
            Some(t),
        ) if t.connection_id.is_none() && t.add_account == need.add_account && t.usable() => {
            Some((t.id, sealed.secret.clone()))
        }
        _ => None,
    };
    let (ticket_id, secret) = match reusable {
        Some(found) => found,
        None => {
            take_link(state, p)?;
            let (user, cid, name) = (p.user(), &p.client_id, provider.name());
            let purpose = if need.add_account {
                tickets::TicketFor::AnotherAccount
            } else {
                tickets::TicketFor::Connect
            };
            let t = tickets::insert(state, user, cid, name, &scopes, purpose)
                .await
                .map_err(internal)?;
            (t.id, t.secret)
        }
    };
    answer_with_link(
        state,
        need,
        provider,
        round,
        (ticket_id, secret),
        elicit::connect_message(provider),
    )
}

/// Counts a new link against the user's limit; the error when it is spent.
fn take_link(state: &ConnectionService, p: &Principal) -> Result<(), ErrorData> {
    if let Err(wait) = state.link_limit.take(p.user()) {
        tracing::info!(
            subject = %p.subject_for_log(),
            client_id = %p.client_id_for_log(),
            "connect link refused: too many this minute"
        );
        return Err(RequestError::TooManyLinks { retry_after: wait }.into());
    }
    Ok(())
}

/// The answer that sends the user to a ticket's link: `input_required`
/// with a URL elicitation and the next round's sealed state, or for a
/// legacy client the `-32042` error.
fn answer_with_link<'s>(
    state: &'s ConnectionService,
    need: &Need<'_>,
    provider: &Provider,
    round: Option<&RoundState>,
    (ticket_id, secret): (uuid::Uuid, tickets::TicketSecret),
    message: String,
) -> Result<Access<'s>, ErrorData> {
    let url = tickets::connect_url(state, &secret);
    if need.client == ClientKind::Legacy {
        return Err(elicit::url_elicitation_required(
            state, provider, message, ticket_id, &url,
        ));
    }
    let next = RoundState {
        ticket: Some(RoundTicket {
            id: ticket_id,
            secret,
        }),
        provider: provider.name().to_owned(),
        round: round.map_or(1, |r| r.round.saturating_add(1)),
        account: round.and_then(|r| r.account),
        offered: Vec::new(),
    };
    let sealed = state.seal_round(&need.binding, &next)?;
    Ok(Access::InputRequired(elicit::input_required(
        provider, message, &url, sealed,
    )))
}

/// Logs and audits a refused `requestState`; returns the one fixed error.
/// `reason` is one of a fixed set of codes; whatever else the caller chose
/// is cut to a printable prefix (the client id by the rule of every audit
/// row, [`db::audit::client_id`]). Repeated refusals of one principal
/// within a minute add to one audit row's `count` (and are logged at
/// debug level), so a flood grows neither the table nor the log.
pub async fn reject_state(
    state: &ConnectionService,
    p: &Principal,
    provider: &str,
    target: &str,
    reason: &'static str,
) -> ErrorData {
    let prefix = crate::crypto::printable_prefix;
    let client_id = db::audit::client_id(&p.client_id);
    let (target, provider) = (prefix(target), prefix(provider));
    let detail = json!({ "reason": reason, "client_id": client_id, "target": target, "count": 1 });
    let counted = db::audit::count_rejection(
        &state.db,
        AuditEvent::new(AuditKind::StateRejected)
            .user(p.user())
            .provider(&provider)
            .detail(detail),
        &client_id,
    )
    .await;
    let subject = prefix(&p.subject);
    match counted {
        Ok(true) => tracing::info!(reason, subject, target, "requestState rejected"),
        Ok(false) => tracing::debug!(reason, subject, target, "requestState rejected again"),
        Err(e) => {
            tracing::error!(error = %e, reason, "requestState rejected; audit row not written")
        }
    }
    RequestError::InvalidState.into()
}

/// The action in the client's answer to our elicitation, if it sent one.
pub(crate) fn response_action(
    responses: Option<&InputResponses>,
    key: &str,
) -> Option<ElicitationAction> {
    round::action_of(responses?.get(key)?)
}

/// Waits until the user's connection to `provider` is announced, the wait
/// limit passes, or the request is cancelled. `true` when announced.
pub(crate) async fn wait_for_connection(
    state: &ConnectionService,
    p: &Principal,
    provider: &ProviderName,
    rx: &mut tokio::sync::broadcast::Receiver<String>,
    cancel: &CancellationToken,
) -> bool {
    let tags = events::tags(&state.keys, p.user(), provider);
    let limit = state.settings.flow.connect_wait();
    let wait = async {
        loop {
            match rx.recv().await {
                Ok(payload) if events::names(&payload, &tags) => return true,
                Ok(_) => {}
                // Missed some: check again rather than guess.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return true,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return false,
            }
        }
    };
    tokio::select! {
        announced = tokio::time::timeout(limit.max(Duration::from_millis(1)), wait) => announced.unwrap_or(false),
        () = cancel.cancelled() => false,
        // Stopping: answer now (input_required again), not after the drain.
        () = state.shutdown.cancelled() => false,
    }
}

fn unknown_provider(state: &ConnectionService, name: &str) -> ErrorData {
    RequestError::UnknownProvider {
        name: name.to_owned(),
        known: state
            .providers
            .names()
            .into_iter()
            .map(str::to_owned)
            .collect(),
    }
    .into()
}
