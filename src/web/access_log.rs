//! One structured line per request outside `/mcp` (which writes its own,
//! `mcp::access_log`): peer, method (a standard one, or `other`), path
//! without the query (`/connect?ticket=…` and OAuth callbacks carry one-time
//! secrets there) and cut to a short printable prefix, status, duration.
//! Health probes, which come every few seconds, are logged at debug. Each
//! request is also counted in the page metrics.

use std::time::Instant;

use actix_web::{
    Error,
    body::MessageBody,
    dev::{ServiceRequest, ServiceResponse},
    middleware::Next,
    web,
};

use crate::state::AppState;

/// The longest start of a path an access line holds.
pub const PATH_CHARS: usize = 160;

pub async fn access_log(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    // Anyone chooses the path, of any length: only its start is logged,
    // long enough for every route of this service and a little more.
    let path = crate::crypto::printable_prefix_of(req.path(), PATH_CHARS);
    let started = Instant::now();
    let method = crate::telemetry::http_method(req.method().as_str());
    let state = req.app_data::<web::Data<AppState>>().cloned();
    let peer = match &state {
        Some(state) => state.client_address(req.request()),
        None => req.peer_addr().map(|a| a.ip()),
    }
    .map(|ip| ip.to_string());
    // Read before the call: a page past its time limit comes back without
    // its request, and is counted under its route all the same.
    let route = req.match_pattern();
    let mut answered = next.call(req).await;
    // A page past its time limit comes back as an error (the deadline has
    // no request left to answer with; actix renders it after): it is
    // logged and counted all the same, under the status it will have.
    let status = match &answered {
        Ok(response) => response.status().as_u16(),
        Err(e) => e.as_response_error().status_code().as_u16(),
    };
    if let Some(state) = state {
        state.metrics.pages.request(route.as_deref(), status);
        if let Ok(response) = &mut answered {
            state.close_connection_if_stopping(response.response_mut().head_mut());
        }
    }
    let ms = (started.elapsed().as_secs_f64() * 100_000.0).round() / 100.0;
    if path == "/healthz" || path == "/readyz" {
        tracing::debug!(peer, http = method, path, status, ms, "request");
    } else {
        tracing::info!(peer, http = method, path, status, ms, "request");
    }
    answered
}
