//! Webhook metrics: delivery attempts by outcome (`delivered`, `retry`:
//! failed and due again, `failed`: given up after the retry window), and
//! the outbox backlog (events not yet delivered, over every endpoint, as
//! this instance's deliverer last counted them).

use std::sync::atomic::{AtomicU64, Ordering};

use super::text::{Exposition, Kind};

const DELIVERIES: &str = "mcp_connect_webhook_deliveries_total";
const BACKLOG: &str = "mcp_connect_webhook_backlog";

/// How one delivery attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The endpoint answered 2xx: the event is done.
    Delivered,
    /// It did not; the event is due again later.
    Retry,
    /// It did not, and the retry window is over: the event is kept, failed.
    Failed,
}

pub const DELIVERY_LABELS: [&str; 3] = ["delivered", "retry", "failed"];

#[derive(Default)]
pub struct WebhookMetrics {
    deliveries: [AtomicU64; DELIVERY_LABELS.len()],
    backlog: AtomicU64,
}

impl WebhookMetrics {
    pub fn delivery(&self, outcome: Delivery) {
        let i = match outcome {
            Delivery::Delivered => 0,
            Delivery::Retry => 1,
            Delivery::Failed => 2,
        };
        self.deliveries[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Attempts that ended with `outcome` so far.
    pub fn count(&self, outcome: Delivery) -> u64 {
        let i = match outcome {
            Delivery::Delivered => 0,
            Delivery::Retry => 1,
            Delivery::Failed => 2,
        };
        self.deliveries[i].load(Ordering::Relaxed)
    }

    pub fn set_backlog(&self, pending: u64) {
        self.backlog.store(pending, Ordering::Relaxed);
    }

    /// The backlog as last counted.
    pub fn backlog(&self) -> u64 {
        self.backlog.load(Ordering::Relaxed)
    }

    pub(super) fn write(&self, e: &mut Exposition) {
        e.family(
            DELIVERIES,
            Kind::Counter,
            "Webhook delivery attempts, by outcome (delivered, retry, failed).",
        );
        for (outcome, count) in DELIVERY_LABELS.iter().zip(&self.deliveries) {
            e.sample(
                DELIVERIES,
                &[("outcome", outcome)],
                count.load(Ordering::Relaxed) as f64,
            );
        }
        e.family(
            BACKLOG,
            Kind::Gauge,
            "Webhook events not yet delivered (all endpoints), as last counted.",
        );
        e.sample(BACKLOG, &[], self.backlog.load(Ordering::Relaxed) as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_is_listed_with_its_count() {
        let m = WebhookMetrics::default();
        m.delivery(Delivery::Retry);
        m.delivery(Delivery::Retry);
        m.delivery(Delivery::Delivered);
        m.set_backlog(7);
        let mut e = Exposition::default();
        m.write(&mut e);
        let text = e.finish();
        for line in [
            "mcp_connect_webhook_deliveries_total{outcome=\"delivered\"} 1\n",
            "mcp_connect_webhook_deliveries_total{outcome=\"retry\"} 2\n",
            "mcp_connect_webhook_deliveries_total{outcome=\"failed\"} 0\n",
            "mcp_connect_webhook_backlog 7\n",
        ] {
            assert!(text.contains(line), "{line:?} in {text}");
        }
    }
}
