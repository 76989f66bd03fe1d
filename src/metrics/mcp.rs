//! MCP request metrics, counted once per request where its log line is
//! written (`mcp::access_log`): requests by method and status class, their
//! latency by method, and `tools/call` outcomes by tool. Each worker
//! thread counts in a shard of its own (`crate::shards`); a scrape adds
//! them up.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use crate::shards::Sharded;

use super::{
    histogram::{BUCKETS, Histogram},
    labels::{self, ENDED_LABELS, Ended, METHOD_LABELS, STATUS_LABELS, TOOL_LABELS},
    text::{Exposition, Kind},
};

const REQUESTS: &str = "mcp_connect_mcp_requests_total";
const DURATION: &str = "mcp_connect_mcp_request_duration_seconds";
const TOOL_CALLS: &str = "mcp_connect_tool_calls_total";

#[derive(Default)]
pub struct McpMetrics {
    shards: Sharded<Counts>,
}

/// What one thread counted.
#[derive(Default)]
struct Counts {
    requests: [[AtomicU64; STATUS_LABELS.len()]; METHOD_LABELS.len()],
    durations: [Histogram; METHOD_LABELS.len()],
    tool_calls: [[AtomicU64; ENDED_LABELS.len()]; TOOL_LABELS.len()],
}

impl McpMetrics {
    /// One request to `/mcp`, answered with `status` after `elapsed`.
    /// `method` is the client's JSON-RPC method, if one was read.
    pub fn request(&self, method: Option<&str>, status: u16, elapsed: Duration) {
        let method = labels::method(method);
        let counts = self.shards.local();
        counts.requests[method][labels::status(status)].fetch_add(1, Ordering::Relaxed);
        counts.durations[method].observe(elapsed);
    }

    /// One `tools/call` that reached the tools, named `tool` by the client.
    pub fn tool_call(&self, tool: &str, ended: Ended) {
        self.shards.local().tool_calls[labels::tool(tool)][labels::ended(ended)]
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Only label combinations that occurred are listed, as Prometheus
    /// client libraries do.
    pub(super) fn write(&self, e: &mut Exposition) {
        e.family(
            REQUESTS,
            Kind::Counter,
            "MCP requests by JSON-RPC method (`other`: not an MCP method; `none`: none read) and HTTP status class.",
        );
        for (m, method) in METHOD_LABELS.iter().enumerate() {
            for (s, status) in STATUS_LABELS.iter().enumerate() {
                let count = self
                    .shards
                    .sum(|c| c.requests[m][s].load(Ordering::Relaxed));
                if count > 0 {
                    e.sample(
                        REQUESTS,
                        &[("method", method), ("status", status)],
                        count as f64,
                    );
                }
            }
        }

        e.family(
            DURATION,
            Kind::Histogram,
            "Time from receiving an MCP request to its response being ready, by JSON-RPC method.",
        );
        let bucket = format!("{DURATION}_bucket");
        let sum = format!("{DURATION}_sum");
        let count = format!("{DURATION}_count");
        for (m, method) in METHOD_LABELS.iter().enumerate() {
            let s = Histogram::snapshot_of(self.shards.all().map(|c| &c.durations[m]));
            if s.count == 0 {
                continue;
            }
            for ((_, le), total) in BUCKETS.iter().zip(s.cumulative) {
                e.sample(&bucket, &[("method", method), ("le", le)], total as f64);
            }
            e.sample(
                &bucket,
                &[("method", method), ("le", "+Inf")],
                s.count as f64,
            );
            e.sample(&sum, &[("method", method)], s.sum_seconds);
            e.sample(&count, &[("method", method)], s.count as f64);
        }

        e.family(
            TOOL_CALLS,
            Kind::Counter,
            "tools/call requests that reached the tools, by tool (`other`: not one of this server's) and how they ended.",
        );
        for (t, tool) in TOOL_LABELS.iter().enumerate() {
            for (n, ended) in ENDED_LABELS.iter().enumerate() {
                let count = self
                    .shards
                    .sum(|c| c.tool_calls[t][n].load(Ordering::Relaxed));
                if count > 0 {
                    e.sample(
                        TOOL_CALLS,
                        &[("tool", tool), ("ended", ended)],
                        count as f64,
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(m: &McpMetrics) -> String {
        let mut e = Exposition::default();
        m.write(&mut e);
        e.finish()
    }

    #[test]
    fn requests_are_counted_by_method_and_status_class() {
        let m = McpMetrics::default();
        m.request(Some("tools/call"), 200, Duration::from_micros(300));
        m.request(Some("tools/call"), 200, Duration::from_millis(2));
        m.request(Some("evil/⚠"), 400, Duration::from_micros(10));
        m.request(None, 401, Duration::from_micros(10));
        let text = render(&m);
        assert!(
            text.contains(
                "mcp_connect_mcp_requests_total{method=\"tools/call\",status=\"2xx\"} 2\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("{method=\"other\",status=\"4xx\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("{method=\"none\",status=\"4xx\"} 1\n"),
            "{text}"
        );
        assert!(!text.contains("evil"), "{text}");
        assert!(
            text.contains("_bucket{method=\"tools/call\",le=\"0.0005\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("_bucket{method=\"tools/call\",le=\"+Inf\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "mcp_connect_mcp_request_duration_seconds_count{method=\"tools/call\"} 2\n"
            ),
            "{text}"
        );
        assert!(
            !text.contains("method=\"ping\""),
            "unused methods are not listed: {text}"
        );
    }

    #[test]
    fn what_every_thread_counted_is_added_up() {
        let m = McpMetrics::default();
        std::thread::scope(|scope| {
            for _ in 0..3 {
                scope.spawn(|| {
                    m.request(Some("tools/call"), 200, Duration::from_micros(300));
                    m.request(Some("tools/call"), 200, Duration::from_secs(20));
                    m.tool_call("whoami", Ended::Complete);
                });
            }
        });
        let text = render(&m);
        for line in [
            "mcp_connect_mcp_requests_total{method=\"tools/call\",status=\"2xx\"} 6\n",
            "_bucket{method=\"tools/call\",le=\"0.0005\"} 3\n",
            "_bucket{method=\"tools/call\",le=\"10\"} 3\n",
            "_bucket{method=\"tools/call\",le=\"+Inf\"} 6\n",
            "_sum{method=\"tools/call\"} 60.0009\n",
            "_count{method=\"tools/call\"} 6\n",
            "mcp_connect_tool_calls_total{tool=\"whoami\",ended=\"complete\"} 3\n",
        ] {
            assert!(text.contains(line), "{line:?} in {text}");
        }
    }

    #[test]
    fn tool_calls_are_counted_by_tool_and_ending() {
        let m = McpMetrics::default();
        m.tool_call("whoami", Ended::InputRequired);
        m.tool_call("whoami", Ended::InputRequired);
        m.tool_call("made-up-tool", Ended::ProtocolError);
        let text = render(&m);
        assert!(
            text.contains(
                "mcp_connect_tool_calls_total{tool=\"whoami\",ended=\"input_required\"} 2\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "mcp_connect_tool_calls_total{tool=\"other\",ended=\"protocol_error\"} 1\n"
            ),
            "{text}"
        );
        assert!(!text.contains("made-up-tool"), "{text}");
    }
}
