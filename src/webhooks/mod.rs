//! Webhooks: delivering the connection events the connection service
//! writes to the outbox (`connect::outbox`) to the operator's endpoints,
//! the Standard Webhooks way (`webhook-id`, `webhook-timestamp`,
//! `webhook-signature`). Only `serve` and `dev` start the deliverer,
//! through the application's background tasks; it sends only when an
//! endpoint is configured.

mod deliver;
mod endpoints;
mod signature;

use std::sync::Arc;

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

pub use deliver::{Deliverer, webhook_id};
pub use endpoints::{Endpoint, Endpoints, SetupError};
pub use signature::sign;

use crate::{config::WebhookSettings, connect::Drain, metrics::Metrics};

/// Counts the backlog for `/metrics`, and starts a deliverer for each
/// endpoint; both stop when `stop` is cancelled, and the deliverers claim
/// nothing more once the server begins to stop (`drain`), finishing the
/// deliveries under way while it drains. The count runs without
/// endpoints too: the events of endpoints that were removed stay until the
/// sweeper deletes them, and an operator who removed the last one still
/// sees them.
/// Each of their database steps gives up after `db_deadline`: a connection
/// gone silent must not stop a loop for good.
pub fn start(
    pool: PgPool,
    endpoints: Endpoints,
    settings: &WebhookSettings,
    db_deadline: std::time::Duration,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
    drain: Drain,
) {
    deliver::count_backlog(pool.clone(), db_deadline, metrics.clone(), stop.clone());
    if endpoints.is_empty() {
        return;
    }
    let endpoints = Arc::new(endpoints);
    for deliverer in Deliverer::for_each(pool, endpoints, settings.clone(), db_deadline, metrics) {
        deliverer.start(stop.clone(), drain.clone());
    }
}
