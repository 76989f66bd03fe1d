//! `/healthz` (the process is up) and `/readyz` (it can serve: it is not
//! stopping, the identity provider's metadata was fetched once, the
//! database answers and every migration is applied).

use actix_web::{HttpResponse, get, web};

use crate::{db, state::AppState};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(healthz).service(readyz);
}

#[get("/healthz")]
async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(serde_json::json!({ "status": "ok" }))
}

/// `/readyz` answers within this long: a frozen database is "not ready",
/// not a hung probe.
const READY_DEADLINE: std::time::Duration = std::time::Duration::from_secs(2);

#[get("/readyz")]
async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    // Draining: a load balancer asking on a kept-alive connection must
    // send nothing new here.
    if state.connect.is_stopping() {
        return HttpResponse::ServiceUnavailable()
            .json(serde_json::json!({ "status": "stopping" }));
    }
    if !super::oidc::metadata_reached(&state).await {
        return HttpResponse::ServiceUnavailable()
            .json(serde_json::json!({ "status": "identity provider unreachable" }));
    }
    let check = db::migrations_applied(&state.db);
    match db::faults::deadline(READY_DEADLINE, check).await {
        Ok(true) => HttpResponse::Ok().json(serde_json::json!({ "status": "ready" })),
        Ok(false) => {
            tracing::warn!("readiness: migrations pending");
            HttpResponse::ServiceUnavailable()
                .json(serde_json::json!({ "status": "migrations pending" }))
        }
        Err(e) => {
            tracing::warn!(error = %e, "readiness: database unreachable");
            HttpResponse::ServiceUnavailable()
                .json(serde_json::json!({ "status": "database unreachable" }))
        }
    }
}
