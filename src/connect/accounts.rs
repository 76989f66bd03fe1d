//! Several accounts at one provider (work and personal): which one a
//! request means. The tool's `account` argument names it (the provider's
//! account id, which always wins, or a label); with several accounts and
//! none named, the user is asked with a form-mode elicitation — a choice
//! among their own labels, no secret — and the retry goes on with the
//! answer. An answer that names no account is asked again.
//!
//! An `account` argument that names no account, or several, is asked
//! about the same way, and the answer to that question is taken.
//!
//! Labels need not be unique (GitLab names accounts by user name, so two
//! instances may both say "alice"): where two accounts share one, each
//! choice adds the account id ("alice (id 42)"), and a label that names
//! several accounts is never taken for any of them — the user is asked,
//! or a client that cannot ask is told to name the account by its id.
//!
//! The choice travels in the sealed `requestState`, so a later round (an
//! approval, a reconnect, the `disconnect` confirmation) keeps it. A
//! client that cannot answer a form (no `elicitation.form`) is told to
//! name the account instead.
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
    /// How a question to the user names it: the label, with the account id
    /// where another of the user's accounts at the provider has that label
    /// too.
    pub name: String,
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
        let limit = self.settings.database.deadline();
        let find = db::connections::find_account(&self.db, user, provider, connection);
        let Some(found) = db::faults::deadline(limit, find).await? else {
            return Ok(None);
        };
        let accounts = db::connections::accounts(&self.db, user, provider);
        let shared = db::faults::deadline(limit, accounts)
            .await?
            .iter()
            .any(|a| a.id != found.id && a.account_label == found.account_label);
        let name = if shared {
            with_id(&found.account_label, &found.account_id)
        } else {
            found.account_label.clone()
        };
        Ok(Some(ChosenAccount {
            connection: found.id,
            account_label: found.account_label,
            account_id: found.account_id,
            name,
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
    let chosen_before = round.and_then(|r| r.account);
    if let Some(id) = chosen_before
        && read.iter().any(|a| a.row.id == id)
    {
        return Ok(Chosen::Connection(Some(id)));
    }
    // The account the arguments name, when they name exactly one; a name
    // several accounts have is no choice among them.
    let unresolved = match need.account {
        None => Asked::Which,
        Some(name) => match named(&accounts, name) {
            Found::One(a) => return Ok(Chosen::Connection(Some(a.row.id))),
            Found::Nothing => Asked::Unknown(name),
            Found::Several => Asked::Several(name),
        },
    };
    if chosen_before.is_some() {
        // Chosen in an earlier round, disconnected since: asked again
        // among those left (never another taken silently), else
        // connected afresh.
        if accounts.is_empty() {
            return Ok(Chosen::Connection(None));
        }
        let asked = match unresolved {
            Asked::Several(name) => Asked::Several(name),
            _ => Asked::Which,
        };
        return ask(state, need, provider, &accounts, round, asked);
    }
    // Read only after a round that asked it (its accounts were offered).
    let answer = round
        .filter(|r| !r.offered.is_empty())
        .and_then(|_| answer(need.input_responses, &input_key(provider.name())));
    match answer {
        Some(Answer::Chose(choice)) => match chosen(&accounts, &choice) {
            Found::One(a) => Ok(Chosen::Connection(Some(a.row.id))),
            // A new account is connected by `connect` with a flag; a name
            // that matches nothing is asked again among those there are.
            Found::Nothing if accounts.is_empty() => Ok(Chosen::Connection(None)),
            Found::Nothing => ask(
                state,
                need,
                provider,
                &accounts,
                round,
                Asked::Unknown(&choice),
            ),
            Found::Several => ask(
                state,
                need,
                provider,
                &accounts,
                round,
                Asked::Several(&choice),
            ),
        },
        Some(Answer::Declined) => Ok(Chosen::Answer(Access::Declined {
            provider_name: provider.display_name().to_owned(),
        })),
        Some(Answer::Cancelled) => Ok(Chosen::Answer(Access::Cancelled {
            provider_name: provider.display_name().to_owned(),
        })),
        None => match unresolved {
            Asked::Which if accounts.len() <= 1 => {
                Ok(Chosen::Connection(accounts.first().map(|a| a.row.id)))
            }
            Asked::Unknown(_) if accounts.is_empty() => Ok(Chosen::Connection(None)),
            _ => ask(state, need, provider, &accounts, round, unresolved),
        },
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
    };
    // The account the person connected was one connected here already, and
    // this client was asked to be approved for it: the approval's answer,
    // or the question again — asked before its token is opened or
    // refreshed, as `require` asks. Gone meanwhile, or in need of its
    // user: another link.
    if let Some(connection) = ticket.as_ref().and_then(|t| t.connection_id) {
        use super::{Checked, grants::Gate};
        let seen = super::grants::GrantSeen::Unread;
        match super::grants::gate(state, need, provider, connection, round, seen).await? {
            Gate::Answer(access) => return Ok(access),
            Gate::Pass => match super::check(state, p, provider, Some(connection), wanted).await? {
                Checked::Ready(token) => return Ok(Access::Ready { token, provider }),
                Checked::RenewalFailed(failure) => return Ok(failure.answer(provider)),
                Checked::Ask { .. } => {}
            },
            Gate::Gone => {}
        }
    }
    let ticket = ticket.filter(|t| t.add_account);
    if let Some(t) = ticket.as_ref().filter(|t| t.declined_at.is_some()) {
        if legacy {
            answered(state, t.id).await?;
        }
        return Ok(Access::Declined {
            provider_name: provider.display_name().to_owned(),
        });
    }
    if let Some((t, refused)) = ticket
        .as_ref()
        .and_then(|t| Some((t, super::authorization_refused(provider, need, t)?)))
    {
        if legacy {
            answered(state, t.id).await?;
        }
        return Ok(refused);
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
            let limit = state.settings.database.deadline();
            db::faults::deadline(limit, db::tickets::stored_connection(&state.db, ticket_id))
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
        if let Some(id) = added {
            // Whether this client may use the account, before its token is
            // opened or refreshed (as `require` asks): an account connected
            // here already, approved for other clients alone, is not
            // refreshed, noted as used or marked for this one's retries.
            use super::grants::{Gate, GrantSeen};
            let access =
                match super::grants::gate(state, need, provider, id, round, GrantSeen::Unread)
                    .await?
                {
                    Gate::Answer(access) => Some(access),
                    // The account just added was disconnected already.
                    Gate::Gone => None,
                    Gate::Pass => match super::check(state, p, provider, Some(id), wanted).await? {
                        super::Checked::Ready(token) => Some(Access::Ready { token, provider }),
                        _ => None,
                    },
                };
            if let Some(access) = access {
                // Answered for good: used, or its approval denied.
                let denied = matches!(access, Access::ApprovalDenied { .. });
                if legacy && (denied || matches!(access, Access::Ready { .. })) {
                    answered(state, ticket_id).await?;
                }
                return Ok(access);
            }
        }
    }
    // A link (a new one, or one not yet taken to the provider) for an
    // account that would be refused once granted.
    if ticket.as_ref().is_none_or(|t| t.redeemed_at.is_none())
        && provider.is_oauth()
        && let Some(at) = limit_reached(state, p.user(), provider.name())
            .await
            .map_err(internal)?
    {
        return Ok(Access::AccountLimitReached {
            message: at.message(provider.display_name()),
        });
    }
    super::ask(state, need, provider, wanted, &[], round, ticket).await
}

/// Whether `user` has as many accounts at `provider` as
/// `flow.accounts_per_provider` allows: `Some(limit)` then. At an OAuth
/// provider a new account would be refused when it is stored
/// (`vault::TooManyAccounts`), after the provider's consent, its grant
/// then to be revoked — and left live if that fails — so asking for
/// another is refused before anything is sent. (Pasted credentials grant
/// nothing: they are checked when stored, where an account's own
/// credentials reconnect it.) Reconnecting one of them is not asking for
/// another.
pub(super) async fn limit_reached(
    state: &ConnectionService,
    user: UserRef<'_>,
    provider: &ProviderName,
) -> Result<Option<AtLimit>, sqlx::Error> {
    let limit = state.settings.flow.accounts_per_provider;
    let read = db::connections::accounts(&state.db, user, provider);
    let accounts = db::faults::deadline(state.settings.database.deadline(), read).await?;
    let at = AtLimit {
        accounts: accounts.len(),
        limit,
    };
    Ok((at.accounts >= limit as usize).then_some(at))
}

/// A person has as many accounts at a provider as the settings allow, or
/// more (the limit lowered since they were connected).
#[derive(Debug, Clone, Copy)]
pub struct AtLimit {
    pub accounts: usize,
    pub limit: u32,
}

impl AtLimit {
    /// What the person (or the model, for them) is told when they ask for
    /// another account at `provider` (its display name).
    pub fn message(self, provider: &str) -> String {
        let Self { accounts, limit } = self;
        let noun = if accounts == 1 { "account" } else { "accounts" };
        if accounts > limit as usize {
            format!(
                "You have {accounts} {provider} {noun} connected here; this server allows at most {limit}. \
                 Disconnect the ones you no longer use on your connections page until you have fewer \
                 than {limit}, then add another."
            )
        } else {
            format!(
                "You have {accounts} {provider} {noun} connected here, the most this server allows. \
                 Disconnect one you no longer use on your connections page, then add another."
            )
        }
    }
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
    /// Its label, for an account the client is approved for (with its
    /// account id where another choice has that label too); otherwise
    /// "GitHub account 2 (not yet approved for this client)", numbered by
    /// the account's place among the user's accounts at the provider.
    name: Cow<'a, str>,
    approved: bool,
}

impl Choice<'_> {
    /// Whether `name` is this choice's name or, for an account the client
    /// is approved for, its label.
    fn is_called(&self, name: &str) -> bool {
        self.name == name || (self.approved && self.row.account_label == name)
    }
}

/// An account's label with its account id: how a choice, or a question,
/// names one of several accounts that share a label.
fn with_id(label: &str, account_id: &str) -> String {
    format!("{label} (id {account_id})")
}

/// The user's accounts (placeholder rows, with no account yet, are no
/// choice), named as the calling client may see them. An account an
/// earlier question `offered` keeps the number it had there; one connected
/// since is numbered after them. No two are named alike (see `distinct`).
fn choices<'a>(
    state: &ConnectionService,
    provider: &Provider,
    read: &'a [CallAccount],
    offered: &[Uuid],
) -> Vec<Choice<'a>> {
    let every_client = state.settings.grants == GrantMode::PerUser;
    let mut newer = offered.len();
    let mut choices: Vec<Choice<'a>> = read
        .iter()
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
        .collect();
    distinct(&mut choices);
    choices
}

/// Gives every approved account whose name another choice has too its
/// account id as well ("alice (id 42)"), until no two names are alike, so
/// that an answer maps back to exactly the account chosen. So too for a
/// label that is another approved account's id: as an `account` argument
/// that name is the other account (ids win). A numbered entry is unique
/// already, and keeps its name: it names nothing more.
fn distinct(choices: &mut [Choice<'_>]) {
    loop {
        let shared: Vec<usize> = (0..choices.len())
            .filter(|&i| {
                let c = &choices[i];
                let others = || choices.iter().enumerate().filter(move |(j, _)| *j != i);
                // Borrowed: the plain label, not yet given its id.
                c.approved
                    && matches!(c.name, Cow::Borrowed(_))
                    && others().any(|(_, other)| {
                        look_alike(&other.name, &c.name)
                            || (other.approved && look_alike(&other.row.account_id, &c.name))
                    })
            })
            .collect();
        if shared.is_empty() {
            return;
        }
        for i in shared {
            let row = choices[i].row;
            choices[i].name = Cow::Owned(with_id(&row.account_label, &row.account_id));
        }
    }
}

/// Whether two names would look the same to a person: equal once put in
/// compatibility form (composed and decomposed accents, full-width
/// letters), case folded and their spaces collapsed (a page shows a run
/// of spaces as one). Letters of other scripts that merely resemble
/// these (a Cyrillic "а") are not caught.
fn look_alike(a: &str, b: &str) -> bool {
    use unicode_normalization::UnicodeNormalization as _;
    let plain = |s: &str| -> String {
        let folded: String = s.nfkc().flat_map(char::to_lowercase).collect();
        folded.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    a == b || plain(a) == plain(b)
}

/// What a name matches among the choices.
enum Found<'c, 'a> {
    One(&'c Choice<'a>),
    Nothing,
    /// More than one account: none of them is taken.
    Several,
}

fn only<'c, 'a>(mut matching: impl Iterator<Item = &'c Choice<'a>>) -> Found<'c, 'a> {
    match (matching.next(), matching.next()) {
        (None, _) => Found::Nothing,
        (Some(one), None) => Found::One(one),
        (Some(_), Some(_)) => Found::Several,
    }
}

/// The account an `account` argument names: an approved account's id at
/// the provider (ids are unique, and an exact one always wins), else the
/// one account whose choice name or (approved) label it is. Never an
/// unapproved account by its own label or id: that would tell a client
/// guessing them which exist.
fn named<'c, 'a>(accounts: &'c [Choice<'a>], name: &str) -> Found<'c, 'a> {
    if let Some(a) = accounts
        .iter()
        .find(|a| a.approved && a.row.account_id == name)
    {
        return Found::One(a);
    }
    only(accounts.iter().filter(|a| a.is_called(name)))
}

/// The account an answer to the question chose: the choice of that name
/// (no two are alike), else what the name would name as an argument.
fn chosen<'c, 'a>(accounts: &'c [Choice<'a>], name: &str) -> Found<'c, 'a> {
    match only(accounts.iter().filter(|a| a.name == name)) {
        Found::Nothing => named(accounts, name),
        found => found,
    }
}

/// Why the question is asked.
#[derive(Clone, Copy)]
enum Asked<'n> {
    /// No account named: which one (or, one left, this one?).
    Which,
    /// The name given matches none of the user's accounts.
    Unknown(&'n str),
    /// The name given is the label of several of them.
    Several(&'n str),
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
    asked: Asked<'_>,
) -> Result<Chosen<'s>, ErrorData> {
    let labels: Vec<String> = accounts.iter().map(|a| a.name.to_string()).collect();
    let can_ask = matches!(
        need.client,
        ClientKind::Modern {
            form_elicitation: true,
            ..
        }
    );
    // A name that is wrong is the model's to mend, in the tool's result,
    // whatever the client can ask.
    match asked {
        Asked::Several(name) if !can_ask => {
            return Ok(Chosen::Answer(Access::AccountAmbiguous {
                message: several_named(provider, accounts, name),
            }));
        }
        Asked::Unknown(_) if !can_ask => {
            let situation = unasked(provider, &labels, asked, Voice::Model);
            return Ok(Chosen::Answer(Access::AccountAmbiguous {
                message: format!(
                    "{situation}. Name one of them in the `account` argument, or connect another \
                     with the `connect` tool and `another_account: true`."
                ),
            }));
        }
        _ => {}
    }
    // A resource has no arguments to name an account in: the tools do.
    let (how_to_name, name_one) = if need.binding.method == "resources/read" {
        (
            "read it with the `whoami` tool, naming the account in its `account` argument",
            "Read it with the `whoami` tool, naming one in its `account` argument.",
        )
    } else {
        (
            "name the one to use in the `account` argument",
            "Name one in the `account` argument.",
        )
    };
    match need.client {
        ClientKind::Legacy => {
            // The model's to mend, in the tool's result (not a JSON-RPC
            // error its client may keep from it).
            let situation = unasked(provider, &labels, asked, Voice::Model);
            return Ok(Chosen::Answer(Access::AccountAmbiguous {
                message: format!("{situation}; {how_to_name}."),
            }));
        }
        ClientKind::Modern {
            form_elicitation: false,
            ..
        } => {
            let situation = unasked(provider, &labels, asked, Voice::User);
            return Err(RequestError::MissingCapability {
                mode: ElicitationMode::Form,
                how: format!(
                    "{situation}, and this client cannot ask you which one \
                     (it did not declare elicitation.form). {name_one}"
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
    let message = match asked {
        Asked::Unknown(_) => format!(
            "That is not one of your {} accounts. Which one should be used?",
            provider.display_name()
        ),
        Asked::Several(name) => format!(
            "Several of your {} accounts are called {name}. Which one should be used?",
            provider.display_name()
        ),
        Asked::Which if accounts.len() > 1 => format!(
            "You have several {} accounts connected. Which one should be used?",
            provider.display_name()
        ),
        // One left: the account chosen before was disconnected since.
        Asked::Which => format!(
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

/// Whom a message about the user's accounts speaks to.
#[derive(Clone, Copy)]
enum Voice {
    /// The model, in a tool's result.
    Model,
    /// The user, in an error their client shows.
    User,
}

/// Why an account must be named, for a client that cannot ask its user
/// which: the accounts there are (`labels`) and what was wrong with the
/// name given, if any. The name is the caller's own, shown back cut short.
fn unasked(provider: &Provider, labels: &[String], asked: Asked<'_>, voice: Voice) -> String {
    let display = provider.display_name();
    let list = labels.join(", ");
    let (whose, whose_first, has) = match voice {
        Voice::Model => ("the user's", "The user's", "The user has"),
        Voice::User => ("your", "Your", "You have"),
    };
    match asked {
        Asked::Unknown(name) => {
            let name: String = name.chars().take(64).collect();
            format!("\"{name}\" is not one of {whose} {display} accounts ({list})")
        }
        Asked::Which if labels.len() == 1 => format!(
            "The {display} account chosen before is no longer connected; {whose_first} {display} account is {list}"
        ),
        Asked::Which | Asked::Several(_) => format!("{has} several {display} accounts ({list})"),
    }
}

/// For a client that cannot ask its user: `name` is the label of several
/// accounts, which are listed with their ids, one of which the model is to
/// name instead. (Only accounts the client is approved for are matched by
/// label, so no other's id is told.)
fn several_named(provider: &Provider, accounts: &[Choice<'_>], name: &str) -> String {
    let matching: Vec<String> = accounts
        .iter()
        .filter(|a| a.is_called(name))
        .map(|a| {
            if a.approved {
                with_id(&a.row.account_label, &a.row.account_id)
            } else {
                a.name.to_string()
            }
        })
        .collect();
    format!(
        "\"{name}\" names several of the user's {display} accounts: {list}. Name the one to use by its \
         id in the `account` argument.",
        display = provider.display_name(),
        list = matching.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::look_alike;

    #[test]
    fn names_a_person_could_not_tell_apart_look_alike() {
        // Composed and decomposed accents, case, full-width letters, runs
        // of spaces a page shows as one.
        assert!(look_alike("Zoë", "Zoe\u{308}"));
        assert!(look_alike("Alice", "alice"));
        assert!(look_alike("ａｌｉｃｅ", "alice"));
        assert!(look_alike("work  account", "work account"));
        assert!(!look_alike("work", "personal"));
        assert!(!look_alike("alice", "alice2"));
    }
}
