//! A provider callback opened again while the first is still exchanging
//! its code: the first marked the flow completed before it went to the
//! provider and has not recorded the connection on it yet. A reload or a
//! double submit from the flow's own browser is asked to wait, and the
//! flow is left for the first to finish; long after, a flow that connected
//! nothing ended in a failed exchange and is refused as used.

use actix_web::{HttpResponse, http::StatusCode};

use crate::{
    db::oauth_flows::OAuthFlow,
    state::AppState,
    web::{
        pages::{self, Notice},
        session::SignedInUser,
    },
};

/// How long after its callback began a code exchange may still run: the
/// provider's token, lookup and identity calls (10 s each at most), the
/// store's statements (each with its time limit) and, when the store
/// fails, two revocations (10 s each) — with room to spare. The exchange
/// runs to its end whatever becomes of its page (`callback::Finishing`),
/// so this does not depend on `web.page_timeout_secs`: a reload within it
/// is asked to wait rather than ending the flow under the exchange.
pub(super) const EXCHANGE_WINDOW_SECS: i64 = 120;

/// Whether `flow`'s first callback may still be exchanging its code: it
/// began a moment ago (by the database's clock, which wrote
/// `completed_at`), has connected nothing yet, and was not a decline at
/// the provider (which completes the flow too, and marks its ticket).
pub(super) async fn under_way(state: &AppState, flow: &OAuthFlow) -> Result<bool, sqlx::Error> {
    let recent = flow
        .completed_at
        .is_some_and(|at| flow.read_at - at < chrono::Duration::seconds(EXCHANGE_WINDOW_SECS));
    if flow.connection_id.is_some() || !recent {
        return Ok(false);
    }
    let ticket = match flow.ticket_id {
        Some(id) => state.connect.ticket(id).await?,
        None => None,
    };
    Ok(ticket.is_none_or(|t| t.declined_at.is_none()))
}

/// The page for the flow's own browser meanwhile: 409, as the flow is in
/// the middle of a change this request cannot make.
pub(super) fn page(user: &SignedInUser, provider: &str) -> HttpResponse {
    pages::render(
        StatusCode::CONFLICT,
        &Notice {
            signed_in: Some(user.display_name.clone()),
            title: format!("Still connecting {provider}"),
            lines: vec![
                "This page was opened again while the connection is being finished.".into(),
                "Reload this page in a moment to see the result.".into(),
            ],
            ..Notice::default()
        },
    )
}
