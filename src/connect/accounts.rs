//! Several accounts at one provider (work and personal): which one a
//! request means. The tool's `account` argument names it (label or the
//! provider's account id); with several accounts and none named, the user
//! is asked with a form-mode elicitation — a choice among their own
//! labels, no secret — and the retry goes on with the answer. An answer
//! that names no account is asked again. The choice travels in the sealed
//! `requestState`, so a later round (an approval, a reconnect, the
//! `disconnect` confirmation) keeps it. A client that cannot answer a form
//! (no `elicitation.form`) is told to name the account instead.
//!
//! A client is told only the labels of accounts it is approved for: any
//! other account appears in the choice, and is matched by name, as a
//! numbered "not yet approved" entry (see `Choice`) — as
//! `connections_list` tells such a client only that the account exists.
//! Choosing one goes on to the approval page, where the person sees which
//! account it is. A label an unapproved client guesses matches nothing.
//!
//! The accounts come from the call's one read (`read`), which also
//! brings each connection's tokens and the calling client's grant: the
//! chosen one (`pick`) goes on to the vault and the grant check without
//! another round trip.

use super::errors::{ElicitationMode, RequestError};
use crate::domain::{ProviderName, UserRef};
use rmcp::{
    ErrorData,
    model::{
        ElicitRequest, ElicitRequestParams, ElicitationAction, ElicitationSchema, EnumSchema,
        InputRequest, InputRequests, InputRequiredResult, InputResponses,
    },
};
use std::borrow::Cow;
use uuid::Uuid;

use super::{Access, ClientKind, Need, internal};
use crate::{
    auth::Principal,
    config::GrantMode,
    connect::ConnectionService,
    connect::state::RoundState,
    db::{
        self,
        call_accounts::{CallAccount, GrantUse},
        connections::ConnectionRow,
    },
    providers::Provider,
};

/// The field of the form that holds the choice.
const FIELD: &str = "account";

/// The inputRequests key of a provider's account question.
pub fn input_key(provider: &str) -> String {
    format!("account_{provider}")
}

/// Which account a request is about, or what to answer instead.
pub enum Chosen<'s> {
    /// Use this connection; `None`: the user has at most one (or none).
    Connection(Option<Uuid>),
    /// Answer the request with this.
    Answer(Access<'s>),
}

/// One of the user's accounts, as an operation on that very account (a
/// disconnect) names it. Never a token.
pub struct ChosenAccount {
    pub connection: Uuid,
    pub account_label: String,
    pub account_id: String,
}

impl ConnectionService {
    /// The account `need` is about (see `choose`): the one named, chosen
    /// in an earlier round, or the only one; or the question to ask.
    pub async fn choose_account<'s>(
        &'s self,
        need: &Need<'_>,
        round: Option<&RoundState>,
    ) -> Result<Chosen<'s>, ErrorData> {
        let provider = self
            .providers
            .get(need.provider)
            .ok_or_else(|| super::unknown_provider(self, need.provider))?;
        let accounts = read(self, need.principal, provider).await?;
        // For an operation on the account itself (disconnect), one chosen
        // earlier and gone since is gone: the caller says so, rather than
        // offer another to act on.
        if let Some(id) = round.and_then(|r| r.account)
            && !accounts.iter().any(|a| a.row.id == id)
        {
            return Ok(Chosen::Connection(Some(id)));
        }
        choose(self, need, provider, round, &accounts)
    }

    /// The user's connection `connection` at `provider` (`None`: the only,
    /// or oldest, one), if it is theirs.
    pub async fn chosen_account(
        &self,
        user: UserRef<'_>,
        provider: &ProviderName,
        connection: Option<Uuid>,
    ) -> Result<Option<ChosenAccount>, sqlx::Error> {
        let found = db::connections::find_account(&self.db, user, provider, connection).await?;
        Ok(found.map(|c| ChosenAccount {
            connection: c.id,
            account_label: c.account_label,
            account_id: c.account_id,
        }))
    }
}

/// The call's one read (`db::call_accounts`): the user's connections to
/// `provider` with their tokens and the calling client's grants, on this
/// thread's connection and within the statement deadline.
pub(super) async fn read(
    state: &ConnectionService,
    p: &Principal,
    provider: &Provider,
) -> Result<Vec<CallAccount>, ErrorData> {
    let read = state.hot_db.run(async |conn| {
        db::call_accounts::read(conn, p.user(), provider.name(), &p.client_id).await
    });
    db::faults::deadline(state.settings.database.deadline(), read)
        .await
        .map_err(internal)
}

/// The connection `chosen` among those read (`None`: the first, as
/// `db::connections::find_account` would pick it), and the calling
/// client's grant on it.
pub(super) fn pick(
    read: Vec<CallAccount>,
    chosen: Option<Uuid>,
) -> (Option<ConnectionRow>, Option<GrantUse>) {
    let mut read = read.into_iter();
    let found = match chosen {
        Some(id) => read.find(|a| a.row.id == id),
        None => read.next(),
    };
    match found {
        Some(a) => (Some(a.row), a.grant),
        None => (None, None),
    }
}

/// Which of the user's connections (`read`: the call's one read, see
/// `db::call_accounts`) the request means.
pub(super) fn choose<'s>(
    state: &'s ConnectionService,
    need: &Need<'_>,
    provider: &Provider,
    round: Option<&RoundState>,
    read: &[CallAccount],
) -> Result<Chosen<'s>, ErrorData> {
    let offered = round.map_or(&[][..], |r| r.offered.as_slice());
    let accounts = choices(state, provider, read, offered);
    if let Some(id) = round.and_then(|r| r.account) {
        if read.iter().any(|a| a.row.id == id) {
            return Ok(Chosen::Connection(Some(id)));
        }
        // Chosen in an earlier round, disconnected since: the one the
        // arguments name, else asked again among those left (never another
        // taken silently), else connected afresh.
        if let Some(named) = need.account.and_then(|name| find(&accounts, name)) {
            return Ok(Chosen::Connection(Some(named.row.id)));
        }
        if accounts.is_empty() {
            return Ok(Chosen::Connection(None));
        }
        return ask(state, need, provider, &accounts, round, None);
    }
    let answer = round.and_then(|_| answer(need.input_responses, &input_key(provider.name())));
    let named = match (need.account, &answer) {
        (Some(name), _) => Some(name.to_owned()),
        (None, Some(Answer::Chose(name))) => Some(name.clone()),
        (None, Some(Answer::Declined)) => {
            return Ok(Chosen::Answer(Access::Declined {
                provider_name: provider.display_name().to_owned(),
            }));
        }
        (None, Some(Answer::Cancelled)) => {
            return Ok(Chosen::Answer(Access::Cancelled {
                provider_name: provider.display_name().to_owned(),
            }));
        }
        (None, None) => None,
    };
    match named {
        Some(name) => match find(&accounts, &name) {
            Some(a) => Ok(Chosen::Connection(Some(a.row.id))),
            // A new account is connected by `connect` with a flag; a name
            // that matches nothing is asked again among those there are.
            None if accounts.is_empty() => Ok(Chosen::Connection(None)),
            None => ask(state, need, provider, &accounts, round, Some(&name)),
        },
        None if accounts.len() > 1 => ask(state, need, provider, &accounts, round, None),
        None => Ok(Chosen::Connection(accounts.first().map(|a| a.row.id))),
    }
}

/// `connect {another_account: true}`: always through the provider (its
/// account chooser); the retry completes with the account stored by that
/// flow. A 2025-11-25 client's retry names no ticket (it has no
/// `requestState`): its ticket is the one this client was given for the
/// user and provider and that no retry has been answered from yet, and an
/// answer marks it, so a later request for another account asks afresh.
pub(super) async fn add<'s>(
    state: &'s ConnectionService,
    need: &Need<'_>,
    provider: &'s Provider,
    wanted: &[String],
    round: Option<&RoundState>,
) -> Result<Access<'s>, ErrorData> {
    let p = need.principal;
    let legacy = need.client == ClientKind::Legacy;
    let ticket = if legacy {
        unanswered_ticket(state, p, provider).await?
    } else {
        super::current_ticket(state, round).await?
    }
    .filter(|t| t.add_account);
    if let Some(t) = ticket.as_ref().filter(|t| t.declined_at.is_some()) {
        if legacy {
            answered(state, t.id).await?;
        }
        return Ok(Access::Declined {
            provider_name: provider.display_name().to_owned(),
        });
    }
    // Redeemed: the person went on to the provider. What completes the
    // call is the connection that ticket's connect stored — not any of the
    // user's accounts that changed since (a refresh, a rename).
    if let Some(ticket_id) = ticket
        .as_ref()
        .filter(|t| t.redeemed_at.is_some())
        .map(|t| t.id)
    {
        let stored = |state: &'s ConnectionService| async move {
            db::tickets::stored_connection(&state.db, ticket_id)
                .await
                .map_err(internal)
        };
        let mut rx = state.events.subscribe();
        let mut added = stored(state).await?;
        // A legacy client retries once its person says the link is done:
        // an accept, in the terms of the newer protocol.
        let accepted = legacy
            || super::response_action(need.input_responses, &super::input_key(provider.name()))
                == Some(ElicitationAction::Accept);
        if added.is_none()
            && accepted
            && super::wait_for_connection(state, p, provider.name(), &mut rx, need.cancel).await
        {
            added = stored(state).await?;
        }
        if let Some(id) = added
            && let super::Checked::Ready(token) =
                super::check(state, p, provider, Some(id), wanted).await?
        {
            let seen = super::grants::GrantSeen::Unread;
            let access = super::grants::admit(state, need, provider, token, round, seen).await?;
            if legacy && matches!(access, Access::Ready { .. }) {
                answered(state, ticket_id).await?;
            }
            return Ok(access);
        }
    }
    super::ask(state, need, provider, wanted, &[], round, ticket).await
}

/// The add-account ticket a 2025-11-25 client's retry belongs to (see
/// [`add`]): one issued within twice a ticket's life, time enough for the
/// person to finish at the provider.
async fn unanswered_ticket(
    state: &ConnectionService,
    p: &Principal,
    provider: &Provider,
) -> Result<Option<db::tickets::Ticket>, ErrorData> {
    let within = state.settings.flow.ticket_ttl() * 2;
    let find = db::tickets::unanswered_add_account(
        &state.db,
        p.user(),
        &p.client_id,
        provider.name(),
        within,
    );
    db::faults::deadline(state.settings.database.deadline(), find)
        .await
        .map_err(internal)
}

async fn answered(state: &ConnectionService, ticket: Uuid) -> Result<(), ErrorData> {
    let mark = db::tickets::mark_answered(&state.db, ticket);
    db::faults::deadline(state.settings.database.deadline(), mark)
        .await
        .map_err(internal)
}

/// One of the user's accounts as the calling client may name it.
struct Choice<'a> {
    row: &'a ConnectionRow,
    /// Its label, for an account the client is approved for; otherwise
    /// "GitHub account 2 (not yet approved for this client)", numbered by
    /// the account's place among the user's accounts at the provider.
    name: Cow<'a, str>,
    approved: bool,
}

/// The user's accounts (placeholder rows, with no account yet, are no
/// choice), named as the calling client may see them. An account an
/// earlier question `offered` keeps the number it had there; one connected
/// since is numbered after them.
fn choices<'a>(
    state: &ConnectionService,
    provider: &Provider,
    read: &'a [CallAccount],
    offered: &[Uuid],
) -> Vec<Choice<'a>> {
    let every_client = state.settings.grants == GrantMode::PerUser;
    let mut newer = offered.len();
    read.iter()
        .filter(|a| !a.row.account_id.is_empty())
        .enumerate()
        .map(|(i, a)| {
            let approved = every_client || a.grant.is_some();
            let place = match offered.iter().position(|id| *id == a.row.id) {
                Some(place) => place,
                None if offered.is_empty() => i,
                None => {
                    newer += 1;
                    newer - 1
                }
            };
            let name = if approved {
                Cow::Borrowed(a.row.account_label.as_str())
            } else {
                Cow::Owned(format!(
                    "{} account {} (not yet approved for this client)",
                    provider.display_name(),
                    place + 1
                ))
            };
            Choice {
                row: &a.row,
                name,
                approved,
            }
        })
        .collect()
}

/// The account `name` names: a choice's name (an approved account's
/// label, or an unapproved one's numbered entry), else an approved
/// account's id at the provider. Never an unapproved account by its own
/// label or id: that would tell a client guessing them which exist.
fn find<'c, 'a>(accounts: &'c [Choice<'a>], name: &str) -> Option<&'c Choice<'a>> {
    accounts.iter().find(|a| a.name == name).or_else(|| {
        accounts
            .iter()
            .find(|a| a.approved && a.row.account_id == name)
    })
}

enum Answer {
    Chose(String),
    Declined,
    Cancelled,
}

fn answer(responses: Option<&InputResponses>, key: &str) -> Option<Answer> {
    let value = responses?.get(key)?;
    let action: ElicitationAction = serde_json::from_value(value.get("action")?.clone()).ok()?;
    match action {
        ElicitationAction::Accept => value
            .get("content")?
            .get(FIELD)?
            .as_str()
            .map(|s| Answer::Chose(s.chars().take(200).collect())),
        ElicitationAction::Decline => Some(Answer::Declined),
        ElicitationAction::Cancel => Some(Answer::Cancelled),
        _ => None,
    }
}

/// What a question offers, for its answer to be read against: the
/// earlier question's accounts (gone ones too, so no number moves), then
/// those connected since, in the order `choices` numbered them.
fn offered_next(round: Option<&RoundState>, accounts: &[Choice<'_>]) -> Vec<Uuid> {
    let mut offered = round.map(|r| r.offered.clone()).unwrap_or_default();
    for a in accounts {
        if !offered.contains(&a.row.id) {
            offered.push(a.row.id);
        }
    }
    offered
}

fn ask<'s>(
    state: &'s ConnectionService,
    need: &Need<'_>,
    provider: &Provider,
    accounts: &[Choice<'_>],
    round: Option<&RoundState>,
    unknown: Option<&str>,
) -> Result<Chosen<'s>, ErrorData> {
    let labels: Vec<String> = accounts.iter().map(|a| a.name.to_string()).collect();
    match need.client {
        ClientKind::Legacy => {
            return Err(RequestError::AccountNotNamed {
                provider: provider.display_name().to_owned(),
                labels,
            }
            .into());
        }
        ClientKind::Modern {
            form_elicitation: false,
            ..
        } => {
            return Err(RequestError::MissingCapability {
                mode: ElicitationMode::Form,
                how: format!(
                    "You have several {name} accounts ({labels}), and this client cannot ask you which one \
                     (it did not declare elicitation.form). Name one in the `account` argument.",
                    name = provider.display_name(),
                    labels = labels.join(", ")
                ),
            }
            .into());
        }
        ClientKind::Modern { .. } => {}
    }
    let schema = ElicitationSchema::builder()
        .required_enum_schema(FIELD, EnumSchema::builder(labels).build())
        .description("The account to use.")
        .build()
        .map_err(|e| internal(anyhow::anyhow!("account question: {e}")))?;
    let message = match unknown {
        Some(_) => format!(
            "That is not one of your {} accounts. Which one should be used?",
            provider.display_name()
        ),
        None if accounts.len() > 1 => format!(
            "You have several {} accounts connected. Which one should be used?",
            provider.display_name()
        ),
        // One left: the account chosen before was disconnected since.
        None => format!(
            "The {} account chosen before is no longer connected. Should this one be used?",
            provider.display_name()
        ),
    };
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    };
    let mut requests = InputRequests::new();
    requests.insert(
        input_key(provider.name()),
        InputRequest::Elicitation(ElicitRequest::new(params)),
    );
    let next = RoundState {
        ticket: None,
        provider: provider.name().to_owned(),
        round: round.map_or(1, |r| r.round.saturating_add(1)),
        account: None,
        offered: offered_next(round, accounts),
    };
    let sealed = state.seal_round(&need.binding, &next)?;
    Ok(Chosen::Answer(Access::InputRequired(
        InputRequiredResult::new(Some(requests), Some(sealed)),
    )))
}
