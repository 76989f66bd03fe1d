//! `GET /connect?ticket=T`: the URL an MCP client shows. It reads the
//! ticket once and moves on to a URL without it; nothing here redeems the
//! ticket (link previews and scanners may fetch it).

use actix_web::{HttpRequest, HttpResponse, web};

use super::{CONSENT_PATH, identity_mismatch};
use crate::{
    db,
    state::AppState,
    web::{
        forms, login,
        pages::{WebError, see_other},
        session::MaybeUser,
    },
};

pub(super) async fn open(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: MaybeUser,
) -> Result<HttpResponse, WebError> {
    let params = forms::query(&req)?;
    let presented = params
        .get("ticket")
        .filter(|t| !t.is_empty())
        .ok_or(WebError::BadRequest(
            "This address is missing part of its connect link. Open the link your MCP client showed you again, copying all of it.",
        ))?;
    let found = state.connect.find_usable_ticket(presented).await?;
    let Some(ticket) = found else {
        tracing::info!("connect link unknown, expired, used or declined");
        return Err(WebError::LinkGone);
    };
    let Some(user) = user.0 else {
        // Sign in first; the ticket id rides in the sign-in's sealed cookie.
        return login::start(&req, &state, CONSENT_PATH, Some(ticket.id), false).await;
    };
    // Kept even on a mismatch: "sign out and use another account" resumes
    // this link from here.
    let newly_pending =
        db::web_sessions::set_pending_ticket(&state.db, user.session_id, Some(ticket.id)).await?;
    if !user.is(ticket.user()) {
        // Recorded once per ticket and session, not at every reload.
        return Ok(identity_mismatch(&state, &req, &user, &ticket, newly_pending).await);
    }
    Ok(see_other(&super::consent_url(&user, ticket.id)))
}
