//! `POST /logout` (CSRF): ends the session — the row and the cookie. With
//! `everywhere=1` (the connections page's "Sign out everywhere") it ends
//! every sign-in of the person, in whatever browser: for a browser left
//! signed in somewhere. With `then=switch-account` (the button on the "made for another account"
//! page) it goes straight on to signing in again, carrying the connect link
//! that page refused (its id is in the form, bound by the form's token,
//! then sealed in the sign-in's cookie), so the ticket never travels
//! through a URL or a log.

use actix_web::{HttpRequest, HttpResponse, http::StatusCode, web};

use super::{
    cookies, forms, login,
    pages::{self, Notice, WebError},
    session::MaybeUser,
};
use crate::{db, state::AppState};
use uuid::Uuid;

/// CSRF purpose of the sign-out forms.
pub const PURPOSE: &str = "logout";

/// The field of the "made for another account" page's second token.
const SWITCH_FIELD: &str = "switch_csrf";

/// CSRF purpose of the "made for another account" page's second token,
/// which binds the link the sign-out comes back to: beside the sign-out's
/// own token, which every release checks (a form of this release posted to
/// an instance of the one before still signs out).
pub fn switch_purpose(ticket_id: Uuid) -> String {
    format!("logout-switch:{ticket_id}")
}

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/logout", web::post().to(logout));
}

async fn logout(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: MaybeUser,
    payload: web::Payload,
) -> Result<HttpResponse, WebError> {
    let form = forms::form(payload, state.settings.body_read_timeout()).await?;
    let removal = cookies::removal(&state.settings, cookies::SESSION);
    let Some(user) = user.0 else {
        // Already signed out: say so, and clear whatever cookie is left.
        // Only one that came: a post from another site carries no cookie
        // (SameSite=Lax) and has no CSRF token to check, and the browser
        // would still take a removal from it — ending the session of a
        // person in the middle of connecting an account.
        // "Sign out everywhere" from a page whose sign-in has ended since:
        // the other browsers were not signed out, and the person must know.
        let mut response = if form.get("everywhere") == Some("1") {
            not_signed_out_everywhere()
        } else {
            signed_out()
        };
        if cookies::sent(&req, &state.settings, cookies::SESSION) {
            response
                .add_cookie(&removal)
                .map_err(|e| WebError::Internal(e.into()))?;
        }
        return Ok(response);
    };
    user.check_csrf(PURPOSE, &form)?;
    // The link to come back to after signing in again: the one the page
    // refused, bound to this session by the form's second token (a form of
    // an earlier release names none: the session's last link, as then).
    let switching_to = match (form.get("then"), form.get("ticket")) {
        (Some("switch-account"), Some(ticket)) => {
            let ticket = Uuid::parse_str(ticket).map_err(|_| {
                WebError::BadRequest("The form is incomplete. Go back and reload the page.")
            })?;
            user.check_csrf_in(SWITCH_FIELD, &switch_purpose(ticket), &form)?;
            Some(ticket)
        }
        _ => user.pending_ticket_id,
    };
    if form.get("everywhere") == Some("1") {
        let ended = db::web_sessions::delete_for_user(&state.db, user.user()).await?;
        tracing::info!(session = %user.session_id, ended, "signed out everywhere");
        let mut response = signed_out_everywhere(ended);
        response
            .add_cookie(&removal)
            .map_err(|e| WebError::Internal(e.into()))?;
        return Ok(response);
    }
    db::web_sessions::delete(&state.db, user.session_id).await?;
    tracing::info!(session = %user.session_id, "signed out");
    let mut response = match (form.get("then"), switching_to) {
        (Some("switch-account"), Some(ticket_id)) => {
            login::start(
                &req,
                &state,
                super::connect::CONSENT_PATH,
                Some(ticket_id),
                true,
            )
            .await?
        }
        _ => signed_out(),
    };
    response
        .add_cookie(&removal)
        .map_err(|e| WebError::Internal(e.into()))?;
    Ok(response)
}

fn signed_out() -> HttpResponse {
    pages::render(
        StatusCode::OK,
        &Notice {
            tone: "ok",
            title: "You are signed out".into(),
            lines: vec!["You can close this tab.".into()],
            link: Some(("/login".into(), "Sign in again".into())),
            ..Notice::default()
        },
    )
}

fn signed_out_everywhere(ended: u64) -> HttpResponse {
    let others = ended.saturating_sub(1);
    pages::render(
        StatusCode::OK,
        &Notice {
            tone: "ok",
            title: "You are signed out everywhere".into(),
            lines: vec![
                match others {
                    0 => "No other browser was signed in as you.".to_owned(),
                    1 => "This browser and 1 other are signed out.".to_owned(),
                    n => format!("This browser and {n} others are signed out."),
                },
                "Connect links opened in them will ask you to sign in again; your connected accounts stay connected.".into(),
            ],
            link: Some(("/login".into(), "Sign in again".into())),
            ..Notice::default()
        },
    )
}

fn not_signed_out_everywhere() -> HttpResponse {
    pages::render(
        StatusCode::OK,
        &Notice {
            tone: "danger",
            title: "Other browsers are still signed in".into(),
            lines: vec![
                "Your sign-in in this browser had already ended, so nothing else was signed out."
                    .into(),
                "Sign in, then press Sign out everywhere on your connections page again.".into(),
            ],
            link: Some(("/login?return_to=/connections".into(), "Sign in".into())),
            ..Notice::default()
        },
    )
}
