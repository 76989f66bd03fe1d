//! What `GET /metrics` reports, in the Prometheus text format: MCP requests
//! (`mcp`), the connect flow (`flow`), outbound calls to providers
//! (`providers`), webhook deliveries (`webhooks`), revocations owed to
//! providers (`revocations`), the database
//! connections and the instance itself. Served by `web::metrics`, which
//! decides who may read it.
//!
//! Every counter is an atomic in a fixed array, indexed by a label from a
//! fixed list (`labels`): counting on the request path is a lookup and an
//! atomic add — no lock, no allocation, no hashing — and nothing a client
//! sends becomes a label value. No subject, client id, token, ticket, URL
//! or provider account is recorded here at all.
//!
//! One [`Metrics`] per application (built at start-up and handed to the
//! parts that count), not a process-wide
//! registry: tests run several applications in one process.

mod flow;
mod histogram;
pub mod labels;
mod mcp;
mod pages;
mod process;
mod providers;
mod revocations;
mod text;
mod webhooks;

use std::time::{SystemTime, UNIX_EPOCH};

pub use flow::{FlowMetrics, Refresh};
pub use mcp::McpMetrics;
pub use pages::PageMetrics;
pub use providers::{CALL_LABELS, Call, CallTimer, OUTCOME_LABELS, ProviderCalls};
pub use revocations::{REVOCATION_LABELS, RevocationAttempt, RevocationMetrics};
pub use text::CONTENT_TYPE;
pub use webhooks::{DELIVERY_LABELS, Delivery, WebhookMetrics};

use text::{Exposition, Kind};

pub struct Metrics {
    /// When this instance started, in seconds since the Unix epoch.
    started: f64,
    pub mcp: McpMetrics,
    pub flow: FlowMetrics,
    pub pages: PageMetrics,
    pub webhooks: WebhookMetrics,
    pub revocations: RevocationMetrics,
}

/// The database connections at the moment of a scrape.
#[derive(Debug, Clone, Copy)]
pub struct DbGauges {
    /// Open connections of the shared pool, in use or idle.
    pub pool_open: u32,
    pub pool_idle: usize,
    pub pool_max: u32,
    /// Per-thread connections of MCP requests (`db::hot`), in use or idle.
    pub hot_open: usize,
    /// Statements of MCP requests the shared pool served because every
    /// per-thread place was taken, since start.
    pub hot_overflowed: u64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        Self {
            started: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            mcp: McpMetrics::default(),
            flow: FlowMetrics::default(),
            pages: PageMetrics::default(),
            webhooks: WebhookMetrics::default(),
            revocations: RevocationMetrics::default(),
        }
    }

    /// The exposition text. `providers`: each configured provider's name
    /// and call counters, in a fixed order.
    pub fn render<'a>(
        &self,
        db: DbGauges,
        providers: impl Iterator<Item = (&'a str, &'a ProviderCalls)> + Clone,
    ) -> String {
        let mut e = Exposition::default();
        e.family(
            "mcp_connect_build_info",
            Kind::Gauge,
            "The running version; always 1.",
        );
        e.sample(
            "mcp_connect_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))],
            1.0,
        );
        e.family(
            "mcp_connect_start_time_seconds",
            Kind::Gauge,
            "When this instance started, in seconds since the Unix epoch.",
        );
        e.sample("mcp_connect_start_time_seconds", &[], self.started.floor());
        self.mcp.write(&mut e);
        self.flow.write(&mut e);
        self.pages.write(&mut e);
        self.webhooks.write(&mut e);
        self.revocations.write(&mut e);
        providers::write(&mut e, providers);
        write_db(&mut e, db);
        process::ProcessStats::read().write(&mut e);
        e.finish()
    }
}

fn write_db(e: &mut Exposition, db: DbGauges) {
    let gauges = [
        (
            "mcp_connect_db_pool_connections",
            "Open connections of the shared database pool (transactions, pages), in use or idle.",
            f64::from(db.pool_open),
        ),
        (
            "mcp_connect_db_pool_idle_connections",
            "Idle connections of the shared database pool.",
            db.pool_idle as f64,
        ),
        (
            "mcp_connect_db_pool_max_connections",
            "The shared database pool's limit.",
            f64::from(db.pool_max),
        ),
        (
            "mcp_connect_db_hot_connections",
            "Open per-thread database connections of MCP requests, in use or idle.",
            db.hot_open as f64,
        ),
    ];
    for (name, help, value) in gauges {
        e.family(name, Kind::Gauge, help);
        e.sample(name, &[], value);
    }
    let overflow = "mcp_connect_db_hot_overflow_total";
    e.family(
        overflow,
        Kind::Counter,
        "Statements of MCP requests served by the shared pool because every per-thread connection was taken \
         (each costs the pool's extra round trip; many mean database_max_connections is small for the load).",
    );
    e.sample(overflow, &[], db.hot_overflowed as f64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_names_the_version_and_the_database_gauges() {
        let m = Metrics::new();
        let text = m.render(
            DbGauges {
                pool_open: 3,
                pool_idle: 2,
                pool_max: 10,
                hot_open: 4,
                hot_overflowed: 7,
            },
            std::iter::empty(),
        );
        let version = env!("CARGO_PKG_VERSION");
        for line in [
            format!("mcp_connect_build_info{{version=\"{version}\"}} 1\n"),
            "mcp_connect_db_pool_connections 3\n".to_owned(),
            "mcp_connect_db_pool_idle_connections 2\n".to_owned(),
            "mcp_connect_db_pool_max_connections 10\n".to_owned(),
            "mcp_connect_db_hot_connections 4\n".to_owned(),
            "mcp_connect_db_hot_overflow_total 7\n".to_owned(),
        ] {
            assert!(text.contains(&line), "{line:?} in {text}");
        }
        let started = text
            .lines()
            .find_map(|l| l.strip_prefix("mcp_connect_start_time_seconds "))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap();
        assert!(started > 1.7e9, "{started}");
    }

    #[test]
    fn every_family_is_declared_once_before_its_samples() {
        let m = Metrics::new();
        m.mcp
            .request(Some("ping"), 200, std::time::Duration::from_micros(5));
        let calls = ProviderCalls::default();
        calls.start(Call::Api).answered(200);
        let text = m.render(
            DbGauges {
                pool_open: 0,
                pool_idle: 0,
                pool_max: 0,
                hot_open: 0,
                hot_overflowed: 0,
            },
            [("demo", &calls)].into_iter(),
        );
        let mut declared: Vec<&str> = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap();
                assert!(!declared.contains(&name), "{name} twice");
                declared.push(name);
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap();
                let family = declared.last().unwrap();
                assert!(name.starts_with(family), "{name} under {family}");
            }
        }
    }
}
