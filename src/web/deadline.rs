//! Every page answers within `web.page_timeout_secs`. Statements have a
//! time limit in Postgres, but a database that stops answering altogether
//! (a network partition, a frozen host) enforces nothing, and a page makes
//! many statements and provider calls. Past the limit the page is dropped
//! — its statements with it: an open transaction rolls back — and the
//! browser gets the 503 page with `Retry-After`, as for any passing fault.

use actix_web::{
    Error,
    body::MessageBody,
    dev::{ServiceRequest, ServiceResponse},
    middleware::Next,
    web,
};

use super::pages::WebError;
use crate::config::{Settings, WebSettings};

pub async fn page_deadline(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let limit = req
        .app_data::<web::Data<Settings>>()
        .map(|s| s.web.page_timeout())
        .unwrap_or_else(|| WebSettings::default().page_timeout());
    match tokio::time::timeout(limit, next.call(req)).await {
        Ok(answered) => answered,
        Err(_) => {
            tracing::warn!(limit_secs = limit.as_secs(), "page not answered in time");
            let late = anyhow::Error::new(crate::db::faults::timed_out())
                .context("the page was not answered in time");
            Err(WebError::Internal(late).into())
        }
    }
}
