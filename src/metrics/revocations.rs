//! Revocations owed to providers (`connect::vault::owed`): attempts by
//! how they ended, and how many are still owed, over every instance, as
//! this instance's retrier last counted them.

use std::sync::atomic::{AtomicU64, Ordering};

use super::text::{Exposition, Kind};

const ATTEMPTS: &str = "mcp_connect_revocation_attempts_total";
const OWED: &str = "mcp_connect_revocation_backlog";

/// How one attempt at a revocation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevocationAttempt {
    /// The provider ended the grant.
    Revoked,
    /// It failed; it is tried again later.
    Retrying,
    /// Given up (the retry window is over, the tokens do not open, the
    /// account was connected again…): the access may stay live there.
    Abandoned,
}

pub const REVOCATION_LABELS: [&str; 3] = ["revoked", "retry", "abandoned"];

impl RevocationAttempt {
    fn index(self) -> usize {
        match self {
            Self::Revoked => 0,
            Self::Retrying => 1,
            Self::Abandoned => 2,
        }
    }
}

#[derive(Default)]
pub struct RevocationMetrics {
    attempts: [AtomicU64; REVOCATION_LABELS.len()],
    owed: AtomicU64,
}

impl RevocationMetrics {
    pub fn attempt(&self, ended: RevocationAttempt) {
        self.attempts[ended.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Attempts that ended so, so far.
    pub fn count(&self, ended: RevocationAttempt) -> u64 {
        self.attempts[ended.index()].load(Ordering::Relaxed)
    }

    pub fn set_owed(&self, owed: u64) {
        self.owed.store(owed, Ordering::Relaxed);
    }

    /// The revocations owed as last counted.
    pub fn owed(&self) -> u64 {
        self.owed.load(Ordering::Relaxed)
    }

    pub(super) fn write(&self, e: &mut Exposition) {
        e.family(
            ATTEMPTS,
            Kind::Counter,
            "Revocations at a provider handled, by how each attempt ended (revoked; retry: failed, due again; abandoned: given up, the provider asked or not).",
        );
        for (ended, count) in REVOCATION_LABELS.iter().zip(&self.attempts) {
            e.sample(
                ATTEMPTS,
                &[("outcome", ended)],
                count.load(Ordering::Relaxed) as f64,
            );
        }
        e.family(
            OWED,
            Kind::Gauge,
            "Revocations still owed to providers, over every instance (the same count on each), as last counted.",
        );
        e.sample(OWED, &[], self.owed.load(Ordering::Relaxed) as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ending_is_listed_with_its_count_and_the_backlog() {
        let m = RevocationMetrics::default();
        m.attempt(RevocationAttempt::Retrying);
        m.attempt(RevocationAttempt::Retrying);
        m.attempt(RevocationAttempt::Revoked);
        m.set_owed(3);
        let mut e = Exposition::default();
        m.write(&mut e);
        let text = e.finish();
        for line in [
            "mcp_connect_revocation_attempts_total{outcome=\"revoked\"} 1\n",
            "mcp_connect_revocation_attempts_total{outcome=\"retry\"} 2\n",
            "mcp_connect_revocation_attempts_total{outcome=\"abandoned\"} 0\n",
            "mcp_connect_revocation_backlog 3\n",
        ] {
            assert!(text.contains(line), "{line:?} in {text}");
        }
    }
}
