//! `GET /oauth/callback/{provider}`: the provider sends the browser back.
//! The flow (found by the SHA-256 of `state`) must be a connect flow for this
//! provider, started by this very browser session, unexpired and unused;
//! anything else is refused and audited. A callback from another browser
//! session leaves the flow alone (holding someone's `state` must not let
//! anyone cancel their connect); any other mismatch deletes it. It is then
//! marked completed in one UPDATE, so a code is exchanged at most once;
//! the same session's reload or double submit meanwhile is asked to wait
//! (`finishing`), and the flow is kept for the exchange under way.
//! An `iss` parameter must name the provider's issuer (RFC 9207) before
//! anything else is believed, and must be there at all for a provider that
//! says it always sends one. A flow whose PKCE verifier no longer opens
//! (the key that sealed it retired sooner than a flow lives) is refused
//! with the page an expired one gets: it can only be started again. Code,
//! state and tokens never reach a page or a log line.

use actix_web::{HttpRequest, HttpResponse, http::StatusCode, web};
use serde_json::json;

use super::{AskedBy, audit, audit_for, connections_link};
use crate::{
    connect::{
        authorization_refusal::AuthorizationRefusal, flows::FinishError, vault::UnusedAccess,
    },
    crypto::secret,
    db::{self, audit::AuditKind, oauth_flows::OAuthFlow},
    domain::UserRef,
    providers::Account,
    providers::Provider,
    state::AppState,
    web::{
        forms,
        pages::{self, Notice, WebError},
        session::{MaybeUser, SignedInUser},
    },
};

const RESTART: &str =
    "This authorization can't be completed. Go back to your MCP client and try again.";

/// [`RESTART`] for a connect begun on the connections page.
const RESTART_FROM_PAGE: &str =
    "This authorization can't be completed. Start again from your connections page.";

/// What a person whose flow `flow` cannot go on is asked to do: start
/// again where they began.
fn restart(flow: &OAuthFlow) -> &'static str {
    match AskedBy::of_flow(flow) {
        AskedBy::ConnectionsPage => RESTART_FROM_PAGE,
        AskedBy::Client => RESTART,
    }
}

/// For a callback that reached another browser (or another profile) than
/// the one the connect started in — a phone opening its default browser,
/// say — or the same browser after its sign-in ended. The flow waits.
const ELSEWHERE: &str = "This authorization was started in another browser, or your sign-in here has ended \
     since. Finish it in the browser where you started, or go back to your MCP client and try again.";

/// [`ELSEWHERE`] for a connect begun on the connections page.
const ELSEWHERE_FROM_PAGE: &str = "This authorization was started in another browser, or your sign-in here has \
     ended since. Finish it in the browser where you started, or start again from your connections page.";

/// What a person whose callback reached another browser is told, by
/// where the flow `flow` began.
fn elsewhere(flow: &OAuthFlow) -> &'static str {
    match AskedBy::of_flow(flow) {
        AskedBy::ConnectionsPage => ELSEWHERE_FROM_PAGE,
        AskedBy::Client => ELSEWHERE,
    }
}

pub(super) async fn callback(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    user: MaybeUser,
) -> Result<HttpResponse, WebError> {
    let provider_name = path.into_inner();
    let params = forms::query(&req)?;
    let Some(flow_state) = params.get("state").filter(|s| secret::is_random_value(s)) else {
        return Err(WebError::FlowRejected(RESTART));
    };
    let found = state.connect.find_flow(flow_state).await?;
    let Some(flow) = found else {
        // The name is the path's, not yet checked against any provider.
        let provider = crate::crypto::printable_prefix_of(&provider_name, 64);
        tracing::info!(provider, "provider callback with an unknown state");
        return Err(WebError::FlowRejected(RESTART));
    };
    let error = params.get("error");
    if let Some(page) =
        already_answered(&state, &flow, &provider_name, error, user.0.as_ref()).await?
    {
        return Ok(page);
    }
    let user = match check_flow(&flow, &provider_name, user.0) {
        Ok(user) => user,
        // Whoever holds someone else's `state` must not be able to cancel
        // their connect: a callback from another session leaves the flow.
        Err(reason @ "other_session") => {
            return Err(reject(&state, &req, &flow, reason, false).await);
        }
        Err(reason) => return Err(reject(&state, &req, &flow, reason, true).await),
    };
    let Some(provider) = state.connect.provider(&provider_name) else {
        // Removed from the configuration while the person was at it.
        tracing::info!(provider = %provider_name, "provider callback for a provider no longer configured");
        return Err(WebError::ProviderGone);
    };
    // Single use: of concurrent or replayed callbacks only one gets here.
    // The others came from this very session (checked above): a double
    // submit, whose first request is exchanging the code now. A flow that
    // nobody completed has expired, by the database's clock, which alone
    // decides (the app's may differ from it by a little).
    let Some(flow) = state.connect.complete_flow(flow.id, flow_state).await? else {
        return match state.connect.find_flow(flow_state).await? {
            Some(now) if now.completed_at.is_none() => {
                Err(reject(&state, &req, &now, "expired", true).await)
            }
            Some(_) => Ok(super::finishing::page(&user, provider.display_name())),
            None => Err(WebError::FlowRejected(restart(&flow))),
        };
    };
    // RFC 9207, with the one trailing slash forgiven as for sign-in: an
    // entry may spell a root issuer either way.
    if let (Some(expected), Some(iss)) = (provider.issuer(), params.get("iss"))
        && !crate::auth::same_issuer(expected, iss)
    {
        return Err(reject(&state, &req, &flow, "iss_mismatch", true).await);
    }
    if provider.requires_iss() && params.get("iss").is_none() {
        return Err(reject(&state, &req, &flow, "iss_missing", true).await);
    }
    if let Some(error) = params.get("error") {
        return refused(&state, &req, &user, &flow, provider, error).await;
    }
    // Neither a code nor an error: nothing to exchange, and a reload must
    // not find the flow "still connecting".
    let Some(code) = params.get("code") else {
        return Err(reject(&state, &req, &flow, "no_code", true).await);
    };
    // Opened here, once, and handed to the exchange: a verifier that does
    // not open is the expired flow's page, not an error after the flow
    // was judged usable.
    let verifier = match crate::connect::flows::open_verifier(&state.keys, &flow) {
        Ok(verifier) => verifier,
        Err(e) => {
            tracing::warn!(flow = %flow.id, key_id = %flow.key_id, error = %e, "the flow's PKCE verifier does not open with this instance's keys (was its key retired sooner than a flow lives?)");
            return Err(reject(&state, &req, &flow, "verifier_unreadable", true).await);
        }
    };
    let asked_by = AskedBy::of_flow(&flow);
    let finishing = Finishing {
        client: crate::web::client_info(&state, &req),
        state: state.get_ref().clone(),
        flow,
        provider: provider_name,
        code: code.to_owned(),
        verifier,
        scope: params.get("scope").map(str::to_owned),
        issuer: user.user().issuer().to_owned(),
        subject: user.user().subject().to_owned(),
    };
    let account = match finishing.run_to_the_end().await {
        Ok(account) => account,
        Err(e) => {
            return Err(match e {
                FinishError::Upstream(e) => match asked_by {
                    AskedBy::ConnectionsPage => WebError::UpstreamFromPage(e),
                    AskedBy::Client => WebError::Upstream(e),
                },
                FinishError::Unaccepted {
                    provider,
                    label,
                    access,
                } => WebError::NotConnected(not_accepted(&provider, &label, access)),
                // The page the person sees anywhere once signed out:
                // sign in, and open the link from the client again.
                FinishError::SignInEnded => WebError::SignedOut,
                FinishError::TooManyAccounts {
                    provider,
                    limit,
                    access,
                } => WebError::TooManyAccounts(too_many_accounts(&provider, limit, Some(access))),
                FinishError::Internal(e) => WebError::Internal(e),
            });
        }
    };
    Ok(connected_page(
        &user,
        provider.display_name(),
        &account.label,
        asked_by,
    ))
}

/// A completed flow's code exchange, the store and their record. The code
/// is spent once the flow is completed, so these run to their end in a
/// task of their own: neither the page's time limit nor a browser that
/// goes away may drop them half-way (tokens issued, neither stored nor
/// revoked, and nothing on the record). Each provider call has a limit of
/// its own, and so has each statement in Postgres; against a database that
/// stops answering altogether, the task itself ends after
/// `finishing::EXCHANGE_WINDOW_SECS`, the time a reload is asked to wait.
/// A stopping server waits for it within its drain.
struct Finishing {
    state: AppState,
    client: (Option<String>, Option<String>),
    flow: OAuthFlow,
    provider: String,
    code: String,
    /// The flow's PKCE verifier, opened when the callback was checked.
    verifier: secrecy::SecretString,
    scope: Option<String>,
    issuer: String,
    subject: String,
}

/// Tells the page waiting for a connect's exchange how it ended; if the
/// page went away meanwhile, what went wrong is told in the log.
fn answer_page(
    page: tokio::sync::oneshot::Sender<Result<Account, FinishError>>,
    finished: Result<Account, FinishError>,
) {
    if let Err(Err(e)) = page.send(finished) {
        tracing::warn!(error = %e, "a connect finished after its page was gone, and failed");
    }
}

impl Finishing {
    async fn run_to_the_end(self) -> Result<Account, FinishError> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let limit = std::time::Duration::from_secs(super::finishing::EXCHANGE_WINDOW_SECS as u64);
        let connect = self.state.connect.clone();
        let flow_id = self.flow.id;
        connect.clone().run_to_the_end(async move {
            let run = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(self.run()));
            let ended = match tokio::time::timeout(limit, run).await {
                Ok(Ok(finished)) => return answer_page(answer, finished),
                Ok(Err(_panicked)) => "failed",
                Err(_) => "did not end in time",
            };
            tracing::error!(
                "finishing a connect {ended}; tokens the provider issued may be neither stored nor revoked"
            );
            // Cut short, the run may not have ended its flow: a reload must
            // find it gone (or its connection, if that was stored), not
            // "still connecting".
            if let Err(e) = connect.discard_unfinished_flow(flow_id).await {
                tracing::warn!(error = %e, "a flow whose exchange was cut short could not be deleted");
            }
            let finished = Err(FinishError::Internal(anyhow::anyhow!(
                "finishing a connect {ended}"
            )));
            answer_page(answer, finished);
        });
        answered.await.unwrap_or_else(|_| {
            Err(FinishError::Internal(anyhow::anyhow!(
                "finishing a connect stopped before it answered"
            )))
        })
    }

    async fn run(self) -> Result<Account, FinishError> {
        let Self {
            state,
            client,
            flow,
            provider: provider_name,
            code,
            verifier,
            scope,
            issuer,
            subject,
        } = self;
        let user = UserRef::new(&issuer, &subject);
        let provider = state.connect.provider(&provider_name).ok_or_else(|| {
            FinishError::Internal(anyhow::anyhow!(
                "provider {provider_name} is not configured"
            ))
        })?;
        let callback = crate::connect::flows::Callback {
            code: &code,
            verifier: &verifier,
            scope: scope.as_deref(),
        };
        let finished = state
            .connect
            .finish_flow(&flow, provider, callback, user)
            .await;
        let (kind, detail) = match &finished {
            Ok((connection_id, account)) => (
                AuditKind::Connected,
                json!({ "connection_id": connection_id, "account_id": account.id, "ticket_id": flow.ticket_id }),
            ),
            Err(e) => {
                // The code is spent whatever went wrong: the flow can do
                // nothing more, and a reload must find it gone, not
                // "still connecting" — unless its connection was stored
                // after all (a commit whose answer was lost), which a
                // reload then shows.
                if let Err(d) = state.connect.discard_unfinished_flow(flow.id).await {
                    tracing::warn!(error = %d, "a flow whose exchange failed could not be deleted");
                }
                match e {
                    // A provider naming a host or site this server refuses
                    // may be an attack on the connect: on the record.
                    FinishError::Unaccepted { access, .. } => (
                        AuditKind::CallbackRejected,
                        json!({ "reason": "value_not_accepted", "flow_id": flow.id,
                                "ticket_id": flow.ticket_id, "revoked": access.revoked(),
                                "kept_for_connection": *access == UnusedAccess::Kept }),
                    ),
                    // So is a person stopped by the limit: an operator
                    // asked why, or judging it, needs to see it, and
                    // whether the access granted upstream was ended.
                    FinishError::TooManyAccounts { limit, access, .. } => (
                        AuditKind::AccountLimitReached,
                        json!({ "limit": limit, "revoked": access.revoked(), "via": "oauth",
                                "kept_for_connection": *access == UnusedAccess::Kept,
                                "flow_id": flow.id, "ticket_id": flow.ticket_id }),
                    ),
                    _ => return finished.map(|(_, account)| account),
                }
            }
        };
        audit_for(
            &state,
            &client,
            kind,
            Some(user),
            Some(&provider_name),
            detail,
        )
        .await;
        finished.map(|(_, account)| account)
    }
}

/// What became of the access a connect was granted and did not store,
/// for the person.
fn access_was(provider: &str, access: UnusedAccess) -> String {
    match access {
        UnusedAccess::Revoked => "The access you had just granted was revoked.".to_owned(),
        UnusedAccess::Kept => format!(
            "The access you had just granted was left in place at {provider}: a connection here holds the same account there, and ending it would end that connection too."
        ),
        UnusedAccess::Live => format!(
            "This server could not revoke the access you had just granted: remove it in your account's settings at {provider}."
        ),
    }
}

/// Why an approved connect was not made, for the person: the value is
/// left out (it may be anything), what happened to the access is not.
fn not_accepted(provider: &str, label: &str, access: UnusedAccess) -> String {
    let access = access_was(provider, access);
    format!(
        "{provider} named a {label} this server does not accept, so nothing was connected. {access} \
         If this is unexpected, ask your administrator which {label}s this server allows."
    )
}

/// What the person is told when a new account would pass the limit of
/// accounts per provider. `access`: what became of the access just
/// granted at the provider; `None` when none was granted (a pasted
/// credential, which stays the person's own).
pub(super) fn too_many_accounts(
    provider: &str,
    limit: u32,
    access: Option<UnusedAccess>,
) -> String {
    let access = access.map_or_else(String::new, |a| format!(" {}", access_was(provider, a)));
    let accounts = if limit == 1 { "account" } else { "accounts" };
    format!(
        "You have {limit} {provider} {accounts} connected here, the most this server allows, so this one was not connected.{access} \
         Disconnect one you no longer use on your connections page, then connect this one again."
    )
}

/// The success page, for the callback that connected the account.
pub(super) fn connected_page(
    user: &SignedInUser,
    provider: &str,
    account: &str,
    asked_by: AskedBy,
) -> HttpResponse {
    let line = match asked_by {
        AskedBy::Client => {
            format!("{provider} connected as {account} — you can return to your MCP client.")
        }
        AskedBy::ConnectionsPage => format!(
            "{provider} connected as {account}. Your MCP clients can use it through this server."
        ),
    };
    pages::render(
        StatusCode::OK,
        &Notice {
            signed_in: Some(user.display_name.clone()),
            tone: "ok",
            title: format!("{provider} connected"),
            lines: vec![line],
            facts: vec![
                ("Provider".into(), provider.to_owned()),
                ("Account".into(), account.to_owned()),
            ],
            link: Some(("/connections".into(), "See your connections".into())),
        },
    )
}

/// A reload of the page this callback showed: the flow was completed, in
/// this very browser session. Shown again as it is now, without touching
/// the flow or the provider (the code is spent): a decline as a decline —
/// never as the success of an account connected before — and a success as
/// the account that flow connected. A flow that connected nothing yet may
/// still be exchanging its code (`finishing`); after that, its exchange
/// failed, and it is refused as used, like any other.
async fn already_answered(
    state: &AppState,
    flow: &OAuthFlow,
    provider_name: &str,
    error: Option<&str>,
    user: Option<&SignedInUser>,
) -> Result<Option<HttpResponse>, WebError> {
    let Some(user) = user else { return Ok(None) };
    let same_browser = flow.is(db::oauth_flows::FlowKind::Connect)
        && flow.completed_at.is_some()
        && flow.provider.as_deref() == Some(provider_name)
        && flow.session_id == Some(user.session_id);
    let Some(provider) = state
        .connect
        .provider(provider_name)
        .filter(|_| same_browser)
    else {
        return Ok(None);
    };
    // Only the page again: a completed flow may be one whose code was
    // exchanged (a Deny pressed after going back to the provider's page
    // must not decline the connect that succeeded).
    if let Some(error) = error {
        return Ok(provider
            .is_decline(error)
            .then(|| declined_page(user, provider, AskedBy::of_flow(flow))));
    }
    let account = state
        .connect
        .account_connected_by(user.user(), flow)
        .await?;
    if let Some(a) = account {
        return Ok(Some(connected_page(
            user,
            provider.display_name(),
            &a.account_label,
            AskedBy::of_flow(flow),
        )));
    }
    // Its first callback is still at the provider: the flow stays.
    Ok(super::finishing::under_way(state, flow)
        .await?
        .then(|| super::finishing::page(user, provider.display_name())))
}

/// The flow may go on only for this browser session; the reason otherwise.
/// The session is checked first: only the flow's own session may cause
/// it to be deleted.
fn check_flow(
    flow: &OAuthFlow,
    provider: &str,
    user: Option<SignedInUser>,
) -> Result<SignedInUser, &'static str> {
    let Some(user) =
        user.filter(|u| flow.session_id.is_some() && flow.session_id == Some(u.session_id))
    else {
        return Err("other_session");
    };
    if !flow.is(db::oauth_flows::FlowKind::Connect) {
        return Err("not_a_connect_flow");
    }
    if flow.provider.as_deref() != Some(provider) {
        return Err("other_provider");
    }
    if flow.completed_at.is_some() {
        return Err("already_used");
    }
    // Expiry is the database's to decide, when the flow is completed.
    Ok(user)
}

/// Refuses the callback: the audit row, the log line, the flow deleted
/// (`delete`) so whatever was wrong cannot be retried, and the error page.
async fn reject(
    state: &AppState,
    req: &HttpRequest,
    flow: &OAuthFlow,
    reason: &'static str,
    delete: bool,
) -> WebError {
    tracing::warn!(flow = %flow.id, reason, "provider callback rejected");
    if delete && let Err(e) = state.connect.discard_flow(flow.id).await {
        return WebError::from(e);
    }
    // A flow left alone can be called back again and again (a reload):
    // audited the first time only; the log above has every one.
    if !delete {
        match state.connect.note_foreign_callback(flow.id).await {
            Ok(true) => {}
            Ok(false) => return WebError::FlowRejected(elsewhere(flow)),
            Err(e) => return WebError::from(e),
        }
    }
    let principal = match flow.ticket_id {
        Some(id) => match state.connect.ticket(id).await {
            Ok(ticket) => ticket,
            Err(e) => {
                // The refusal stands; only the audit row loses its user.
                tracing::error!(error = %e, "cannot read the ticket of a rejected flow");
                None
            }
        },
        None => None,
    };
    audit(
        state,
        req,
        AuditKind::CallbackRejected,
        principal.as_ref().map(|t| t.user()),
        flow.provider.as_deref(),
        json!({ "reason": reason, "flow_id": flow.id, "ticket_id": flow.ticket_id }),
    )
    .await;
    WebError::FlowRejected(if delete {
        restart(flow)
    } else {
        elsewhere(flow)
    })
}

/// The provider answered with an error instead of a code.
async fn refused(
    state: &AppState,
    req: &HttpRequest,
    user: &SignedInUser,
    flow: &OAuthFlow,
    provider: &Provider,
    error: &str,
) -> Result<HttpResponse, WebError> {
    if !provider.is_decline(error) {
        // Only a short code of the characters error codes are made of goes
        // to the log, the page, the ticket and so the model.
        let code: String = error
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            .take(40)
            .collect();
        let code = if code.is_empty() {
            "no_error_code".to_owned()
        } else {
            code
        };
        tracing::warn!(flow = %flow.id, error = %code, "provider refused the authorization");
        // The client's retry says why, once, rather than hand out another
        // link that would fail the same way (before the flow goes: the
        // ticket is found through it).
        if let Err(e) = state.connect.refuse_flow(flow.id, &code).await {
            tracing::warn!(error = %e, "a refused flow's ticket could not be marked");
        }
        // The flow can do nothing more: gone, so that a reload is refused
        // as an unknown flow rather than told to wait or audited as reused.
        if let Err(e) = state.connect.discard_flow(flow.id).await {
            tracing::warn!(error = %e, "a flow the provider refused could not be deleted");
        }
        audit(
            state,
            req,
            AuditKind::CallbackRejected,
            Some(user.user()),
            flow.provider.as_deref(),
            json!({ "reason": "provider_error", "error": code, "flow_id": flow.id, "ticket_id": flow.ticket_id }),
        )
        .await;
        let from_page = matches!(AskedBy::of_flow(flow), AskedBy::ConnectionsPage);
        // Whose scopes an `invalid_scope` is about, the page cannot tell
        // (the client's retry can): its sentence names both.
        let sentence = AuthorizationRefusal::of(&code, true).for_person(
            provider.display_name(),
            &code,
            from_page,
        );
        return Err(WebError::AuthorizationRefused(sentence));
    }
    declined(state, req, user, flow, provider).await
}

/// The person declined at the provider: the flow's ticket is declined,
/// so that the client's retry says so, and recorded once (a reload finds
/// it declined, and declines nothing).
async fn declined(
    state: &AppState,
    req: &HttpRequest,
    user: &SignedInUser,
    flow: &OAuthFlow,
    provider: &Provider,
) -> Result<HttpResponse, WebError> {
    if state.connect.decline_flow(flow.id).await? {
        audit(
            state,
            req,
            AuditKind::ConsentCancelled,
            Some(user.user()),
            flow.provider.as_deref(),
            json!({ "ticket_id": flow.ticket_id, "at": "provider" }),
        )
        .await;
    }
    Ok(declined_page(user, provider, AskedBy::of_flow(flow)))
}

/// The page for a person who declined at the provider.
fn declined_page(user: &SignedInUser, provider: &Provider, asked_by: AskedBy) -> HttpResponse {
    let (lines, link) = match asked_by {
        AskedBy::Client => (
            vec![
                "Nothing was connected. Your MCP client will see that you declined.".into(),
                "You can close this tab.".into(),
            ],
            None,
        ),
        AskedBy::ConnectionsPage => (vec!["Nothing was connected.".into()], connections_link()),
    };
    pages::render(
        StatusCode::OK,
        &Notice {
            signed_in: Some(user.display_name.clone()),
            title: format!("You declined access at {}", provider.display_name()),
            lines,
            link,
            ..Notice::default()
        },
    )
}
