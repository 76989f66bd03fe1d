//! Connect-flow metrics: connect links issued, connections stored (a user
//! finished connecting an account), third-party token refreshes by result,
//! and access tokens a provider refused on an API call. Counted where each
//! happens, in this instance.

use std::sync::atomic::{AtomicU64, Ordering};

use super::text::{Exposition, Kind};

const TICKETS: &str = "mcp_connect_tickets_issued_total";
const STORED: &str = "mcp_connect_connections_stored_total";
const REFRESHES: &str = "mcp_connect_token_refreshes_total";
const REFUSED: &str = "mcp_connect_tokens_refused_total";

/// How a refresh of a third-party access token ended.
#[derive(Debug, Clone, Copy)]
pub enum Refresh {
    /// New tokens stored.
    Ok,
    /// The provider refused the grant (or there was no refresh token): the
    /// user must connect again.
    NeedsReauth,
    /// The provider could not be asked or answered wrongly; the call failed
    /// and the connection stays as it was.
    Error,
}

const REFRESH_LABELS: [&str; 3] = ["ok", "needs_reauth", "error"];

#[derive(Default)]
pub struct FlowMetrics {
    tickets_issued: AtomicU64,
    connections_stored: AtomicU64,
    refreshes: [AtomicU64; REFRESH_LABELS.len()],
    tokens_refused: AtomicU64,
}

impl FlowMetrics {
    pub fn ticket_issued(&self) {
        self.tickets_issued.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connection_stored(&self) {
        self.connections_stored.fetch_add(1, Ordering::Relaxed);
    }

    pub fn refresh(&self, result: Refresh) {
        let i = match result {
            Refresh::Ok => 0,
            Refresh::NeedsReauth => 1,
            Refresh::Error => 2,
        };
        self.refreshes[i].fetch_add(1, Ordering::Relaxed);
    }

    /// A provider answered an API call with 401 for a stored access token.
    pub fn token_refused(&self) {
        self.tokens_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Every sample is listed, zero or not: the set is small and fixed.
    pub(super) fn write(&self, e: &mut Exposition) {
        e.family(
            TICKETS,
            Kind::Counter,
            "Connect links (one-time tickets) issued.",
        );
        e.sample(
            TICKETS,
            &[],
            self.tickets_issued.load(Ordering::Relaxed) as f64,
        );
        e.family(
            STORED,
            Kind::Counter,
            "Third-party connections stored after a user connected an account.",
        );
        e.sample(
            STORED,
            &[],
            self.connections_stored.load(Ordering::Relaxed) as f64,
        );
        e.family(
            REFRESHES,
            Kind::Counter,
            "Refreshes of third-party access tokens, by result (ok, needs_reauth, error).",
        );
        for (result, count) in REFRESH_LABELS.iter().zip(&self.refreshes) {
            e.sample(
                REFRESHES,
                &[("result", result)],
                count.load(Ordering::Relaxed) as f64,
            );
        }
        e.family(
            REFUSED,
            Kind::Counter,
            "Stored access tokens a provider refused (HTTP 401) on an API call.",
        );
        e.sample(
            REFUSED,
            &[],
            self.tokens_refused.load(Ordering::Relaxed) as f64,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_is_listed_with_its_count() {
        let m = FlowMetrics::default();
        m.ticket_issued();
        m.ticket_issued();
        m.connection_stored();
        m.refresh(Refresh::NeedsReauth);
        m.token_refused();
        let mut e = Exposition::default();
        m.write(&mut e);
        let text = e.finish();
        for line in [
            "mcp_connect_tickets_issued_total 2\n",
            "mcp_connect_connections_stored_total 1\n",
            "mcp_connect_token_refreshes_total{result=\"ok\"} 0\n",
            "mcp_connect_token_refreshes_total{result=\"needs_reauth\"} 1\n",
            "mcp_connect_token_refreshes_total{result=\"error\"} 0\n",
            "mcp_connect_tokens_refused_total 1\n",
        ] {
            assert!(text.contains(line), "{line:?} in {text}");
        }
    }
}
