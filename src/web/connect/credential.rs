//! The connect page of an API-key or Basic provider: the same ticket,
//! identity check and CSRF token as the OAuth consent page, but a form on
//! this server's own page — the entry's fields and parameters, its
//! instructions and where to create the key. The connection service checks
//! and stores what is posted; this module only shows its answer. Secret
//! values are never written back into the page.

use actix_web::{HttpRequest, HttpResponse, http::StatusCode};
use askama::Template;
use serde_json::json;

use super::{AskedBy, audit, callback::connected_page, consent::csrf_purpose};
use crate::{
    connect::credentials::{CredentialOutcome, SubmittedCredential},
    db::{audit::AuditKind, tickets::Ticket},
    providers::{FormProblem, Provider},
    state::AppState,
    web::{
        forms,
        pages::{self, WebError},
        session::SignedInUser,
    },
};

const FIELD: &str = "field.";
const PARAM: &str = "param.";

#[derive(Template)]
#[template(path = "connect/credential.html")]
struct CredentialPage {
    signed_in: Option<String>,
    host: String,
    provider: String,
    /// "API key" or "credential", in the sentence on storage.
    kind: &'static str,
    instructions: Option<String>,
    key_url: Option<String>,
    inputs: Vec<Input>,
    /// What went wrong with the form as a whole.
    problems: Vec<String>,
    client_id: Option<String>,
    ticket_id: String,
    csrf: String,
}

/// One input of a connect form (here and on the OAuth consent page).
pub(super) struct Input {
    /// The form name: `field.<name>` or `param.<name>`.
    pub(super) name: String,
    pub(super) id: String,
    pub(super) label: String,
    /// `password` for secret fields.
    pub(super) kind: &'static str,
    /// Shown again only for parameters and identifiers.
    pub(super) value: String,
    pub(super) error: Option<String>,
}

/// What the page shows around the form.
pub(super) struct Context<'a> {
    pub host: String,
    pub client_id: Option<String>,
    pub provider: &'a Provider,
}

/// The label of the connection `ticket` stored, if it stored one: a
/// second submit of the same form (a double click, a reload) answers as
/// the first did, not as a spent link while the key is connected. The
/// ticket is this person's (checked by the caller), and so is the
/// connection looked up.
async fn stored_by(
    state: &AppState,
    user: &SignedInUser,
    ticket: &Ticket,
) -> Result<Option<String>, WebError> {
    let Some(id) = crate::db::tickets::stored_connection(&state.db, ticket.id).await? else {
        return Ok(None);
    };
    let connection = state.connect.connection_of(user.user(), id).await?;
    Ok(connection.map(|c| c.account_label))
}

/// The empty form (parameters at their defaults).
pub(super) fn show(user: &SignedInUser, ticket: &Ticket, context: Context<'_>) -> HttpResponse {
    let empty = forms::Params::default();
    render(user, ticket, context, &empty, &[], StatusCode::OK)
}

/// The posted form: connected, or the form again saying what went wrong.
pub(super) async fn submit(
    state: &AppState,
    req: &HttpRequest,
    user: &SignedInUser,
    ticket: &Ticket,
    form: &forms::Params,
    context: Context<'_>,
) -> Result<HttpResponse, WebError> {
    let provider = context.provider;
    let (fields, params) = (form.with_prefix(FIELD), posted_params(form));
    let outcome = state
        .connect
        .connect_with_credential(
            ticket,
            user.user(),
            user.session_id,
            SubmittedCredential {
                fields: &fields,
                params: &params,
            },
        )
        .await?;
    let name = provider.display_name();
    let (problems, status) = match outcome {
        CredentialOutcome::Connected {
            connection_id,
            account,
            ticket,
        } => {
            let user_ids = Some(user.user());
            let client_id = crate::db::audit::client_id(&ticket.client_id);
            let detail = json!({ "ticket_id": ticket.id, "client_id": client_id, "scopes": [] });
            audit(
                state,
                req,
                AuditKind::ConsentGiven,
                user_ids,
                Some(provider.name()),
                detail,
            )
            .await;
            let detail = json!({ "connection_id": connection_id, "account_id": account.id, "ticket_id": ticket.id });
            audit(
                state,
                req,
                AuditKind::Connected,
                user_ids,
                Some(provider.name()),
                detail,
            )
            .await;
            return Ok(connected_page(
                user,
                name,
                &account.label,
                AskedBy::of_ticket(state, &ticket),
            ));
        }
        CredentialOutcome::TicketGone => {
            return match stored_by(state, user, ticket).await? {
                Some(label) => Ok(connected_page(
                    user,
                    name,
                    &label,
                    AskedBy::of_ticket(state, ticket),
                )),
                None => Err(WebError::LinkGone),
            };
        }
        CredentialOutcome::Invalid(problems) => (problems, StatusCode::UNPROCESSABLE_ENTITY),
        CredentialOutcome::Refused { status } => {
            tracing::info!(provider = %provider.name(), %status, "credential refused by the provider; not stored");
            let message = format!(
                "{name} refused these credentials ({status}). Nothing was stored. Check that you copied them whole and that they are still valid, then try again."
            );
            (vec![whole_form(message)], StatusCode::UNPROCESSABLE_ENTITY)
        }
        CredentialOutcome::TooManyChecks(wait) => {
            tracing::info!(provider = %provider.name(), "credential checks over the limit; nothing sent");
            let message = format!(
                "Too many attempts in a short time, so these credentials were not checked. Try again in {} seconds.",
                wait.as_secs().max(1)
            );
            (vec![whole_form(message)], StatusCode::TOO_MANY_REQUESTS)
        }
        CredentialOutcome::TooManyAccounts { limit } => {
            tracing::info!(provider = %provider.name(), limit, "a new account over the limit of accounts per provider; not stored");
            // Nothing was granted here to revoke (`null`): the credential
            // stays the person's own, at the provider.
            let detail = json!({ "limit": limit, "revoked": null, "via": "credential",
                                 "ticket_id": ticket.id });
            let kind = AuditKind::AccountLimitReached;
            let (user_ids, at) = (Some(user.user()), Some(provider.name().as_str()));
            audit(state, req, kind, user_ids, at, detail).await;
            let message = super::callback::too_many_accounts(name, limit, None);
            (vec![whole_form(message)], StatusCode::CONFLICT)
        }
        CredentialOutcome::Unchecked(e) => {
            tracing::warn!(provider = %provider.name(), error = %e, "credential could not be checked; not stored");
            let message = format!(
                "{name} could not check these credentials just now, so nothing was stored. Try again in a moment."
            );
            (vec![whole_form(message)], StatusCode::BAD_GATEWAY)
        }
    };
    Ok(render(user, ticket, context, form, &problems, status))
}

fn whole_form(message: String) -> FormProblem {
    FormProblem {
        name: String::new(),
        label: String::new(),
        message,
    }
}

fn render(
    user: &SignedInUser,
    ticket: &Ticket,
    context: Context<'_>,
    form: &forms::Params,
    problems: &[FormProblem],
    status: StatusCode,
) -> HttpResponse {
    let provider = context.provider;
    let error_of = |name: &str| error_of(problems, name);
    let mut inputs = param_inputs(provider, form, &Default::default(), problems);
    inputs.extend(provider.credential_fields().into_iter().map(|f| {
        Input {
            name: format!("{FIELD}{}", f.name),
            id: format!("field-{}", f.name),
            kind: if f.secret { "password" } else { "text" },
            // A secret typed once is not written into a page again.
            value: match f.secret {
                true => String::new(),
                false => form
                    .get(&format!("{FIELD}{}", f.name))
                    .unwrap_or_default()
                    .to_owned(),
            },
            error: error_of(&f.name),
            label: f.label,
        }
    }));
    let page = CredentialPage {
        signed_in: Some(user.display_name.clone()),
        host: context.host,
        provider: provider.display_name().to_owned(),
        kind: match provider.credential_kind() {
            "api_key" => "API key",
            _ => "credential",
        },
        instructions: provider.instructions().map(str::to_owned),
        key_url: provider.key_url().map(str::to_owned),
        inputs,
        problems: whole_form_problems(problems),
        client_id: context.client_id,
        ticket_id: ticket.id.to_string(),
        csrf: user.csrf_token(&csrf_purpose(ticket.id)),
    };
    pages::render(status, &page)
}

/// The entry's asked parameters as inputs: what was posted, else the
/// `known` value, else the default; with the problem found in each.
pub(super) fn param_inputs(
    provider: &Provider,
    form: &forms::Params,
    known: &std::collections::BTreeMap<String, String>,
    problems: &[FormProblem],
) -> Vec<Input> {
    provider
        .asked_params()
        .into_iter()
        .map(|(name, label, default)| Input {
            name: format!("{PARAM}{name}"),
            id: format!("param-{name}"),
            label: label.to_owned(),
            kind: "text",
            value: form
                .get(&format!("{PARAM}{name}"))
                .or(known.get(name).map(String::as_str))
                .or(default)
                .unwrap_or_default()
                .to_owned(),
            error: error_of(problems, name),
        })
        .collect()
}

/// The parameters posted with the form, by name.
pub(super) fn posted_params(form: &forms::Params) -> std::collections::BTreeMap<String, String> {
    form.with_prefix(PARAM)
}

/// The problems of the form as a whole (those naming no input).
pub(super) fn whole_form_problems(problems: &[FormProblem]) -> Vec<String> {
    problems
        .iter()
        .filter(|p| p.name.is_empty())
        .map(|p| p.message.clone())
        .collect()
}

fn error_of(problems: &[FormProblem], name: &str) -> Option<String> {
    problems
        .iter()
        .find(|p| p.name == name)
        .map(|p| p.message.clone())
}
