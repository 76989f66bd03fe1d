//! Outbound calls to third-party providers: how many, how they ended and
//! how long they took, by provider and kind of call. Each configured
//! provider owns one [`ProviderCalls`], made with it at start-up, so the
//! `provider` label takes its values from the operator's configuration and
//! counting a call is an index and two atomic adds, with no lock and no
//! allocation, in the calling thread's shard (`crate::shards`).

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Instant,
};

use crate::shards::Sharded;

use super::{
    histogram::{BUCKETS, Histogram},
    text::{Exposition, Kind},
};

const CALLS: &str = "mcp_connect_provider_calls_total";
const DURATION: &str = "mcp_connect_provider_call_duration_seconds";

/// What a call to a provider was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// Authorization code exchange at the token endpoint.
    Token,
    Refresh,
    /// The account identity (userinfo) request.
    Identity,
    /// `api_request` as the user.
    Api,
    /// RFC 7009 revocation.
    Revoke,
    /// A per-connection parameter looked up after consent.
    Lookup,
    /// A token's check after a revocation answer that cannot tell an
    /// ended token from a refusal (GitHub's 422).
    TokenCheck,
}

/// Every value of the `call` label, in the order of [`Call`].
pub const CALL_LABELS: [&str; 7] = [
    "token",
    "refresh",
    "identity",
    "api",
    "revoke",
    "lookup",
    "token_check",
];

/// Every value of the `outcome` label: a 2xx answer, any other status, no
/// answer (connect, timeout or read failure, or the call was abandoned).
pub const OUTCOME_LABELS: [&str; 3] = ["ok", "http_error", "transport"];

impl Call {
    fn index(self) -> usize {
        match self {
            Call::Token => 0,
            Call::Refresh => 1,
            Call::Identity => 2,
            Call::Api => 3,
            Call::Revoke => 4,
            Call::Lookup => 5,
            Call::TokenCheck => 6,
        }
    }
}

/// One provider's call counters.
#[derive(Default)]
pub struct ProviderCalls {
    shards: Sharded<Counts>,
}

/// What one thread counted.
#[derive(Default)]
struct Counts {
    counts: [[AtomicU64; OUTCOME_LABELS.len()]; CALL_LABELS.len()],
    durations: [Histogram; CALL_LABELS.len()],
}

impl std::fmt::Debug for ProviderCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderCalls").finish_non_exhaustive()
    }
}

impl ProviderCalls {
    /// How many `call`s ended with `outcome` (one of [`OUTCOME_LABELS`]).
    #[cfg(test)]
    pub fn count(&self, call: Call, outcome: &str) -> u64 {
        OUTCOME_LABELS
            .iter()
            .position(|o| *o == outcome)
            .map_or(0, |i| self.counted(call.index(), i))
    }

    /// The calls of every shard with `call` and `outcome` (indexes of
    /// [`CALL_LABELS`] and [`OUTCOME_LABELS`]).
    fn counted(&self, call: usize, outcome: usize) -> u64 {
        self.shards
            .sum(|c| c.counts[call][outcome].load(Ordering::Relaxed))
    }

    fn durations(&self, call: usize) -> super::histogram::Snapshot {
        Histogram::snapshot_of(self.shards.all().map(|c| &c.durations[call]))
    }

    /// Starts timing a call about to be sent. It is counted when the
    /// returned [`CallTimer`] is dropped, however the caller leaves.
    pub fn start(&self, call: Call) -> CallTimer<'_> {
        CallTimer {
            calls: self,
            call,
            started: Instant::now(),
            status: None,
        }
    }
}

/// A call in flight. Until [`CallTimer::answered`] it counts as
/// `transport`: an early return on a send error, or a request dropped
/// while waiting, is a call that got no answer.
#[must_use = "the call is counted when the timer is dropped"]
pub struct CallTimer<'a> {
    calls: &'a ProviderCalls,
    call: Call,
    started: Instant,
    status: Option<u16>,
}

impl CallTimer<'_> {
    /// The provider answered with `status` (the body may still be read).
    pub fn answered(&mut self, status: u16) {
        self.status = Some(status);
    }

    /// The answer's body could not be read: no answer after all.
    pub fn unread(&mut self) {
        self.status = None;
    }

    /// Ends the call now, before the answer is parsed: parsing is not the
    /// provider's time.
    pub fn finish(self) {}
}

impl Drop for CallTimer<'_> {
    fn drop(&mut self) {
        let outcome = match self.status {
            Some(200..=299) => 0,
            Some(_) => 1,
            None => 2,
        };
        let i = self.call.index();
        let counts = self.calls.shards.local();
        counts.counts[i][outcome].fetch_add(1, Ordering::Relaxed);
        counts.durations[i].observe(self.started.elapsed());
    }
}

/// Writes both families for `providers` (name and counters, in a fixed
/// order). Every call and outcome of every provider is listed, zero or not,
/// so an alert on a rate finds its series; histograms only once observed.
pub(super) fn write<'a>(
    e: &mut Exposition,
    providers: impl Iterator<Item = (&'a str, &'a ProviderCalls)> + Clone,
) {
    e.family(
        CALLS,
        Kind::Counter,
        "Outbound calls to a configured provider, by provider, call (token, refresh, identity, api, revoke, lookup, token_check) and outcome (ok: 2xx; http_error: another status; transport: no answer).",
    );
    for (provider, calls) in providers.clone() {
        for (c, call) in CALL_LABELS.iter().enumerate() {
            for (o, outcome) in OUTCOME_LABELS.iter().enumerate() {
                e.sample(
                    CALLS,
                    &[("provider", provider), ("call", call), ("outcome", outcome)],
                    calls.counted(c, o) as f64,
                );
            }
        }
    }

    e.family(
        DURATION,
        Kind::Histogram,
        "Time from sending a call to a provider to its answer being read, or to giving up, by provider and call.",
    );
    let bucket = format!("{DURATION}_bucket");
    let sum = format!("{DURATION}_sum");
    let count = format!("{DURATION}_count");
    for (provider, calls) in providers {
        for (c, call) in CALL_LABELS.iter().enumerate() {
            let s = calls.durations(c);
            if s.count == 0 {
                continue;
            }
            let labels = [("provider", provider), ("call", *call)];
            for ((_, le), total) in BUCKETS.iter().zip(s.cumulative) {
                e.sample(&bucket, &[labels[0], labels[1], ("le", le)], total as f64);
            }
            e.sample(
                &bucket,
                &[labels[0], labels[1], ("le", "+Inf")],
                s.count as f64,
            );
            e.sample(&sum, &labels, s.sum_seconds);
            e.sample(&count, &labels, s.count as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn render(providers: &[(&str, &ProviderCalls)]) -> String {
        let mut e = Exposition::default();
        write(&mut e, providers.iter().copied());
        e.finish()
    }

    #[test]
    fn calls_are_counted_by_outcome_of_their_status() {
        let github = ProviderCalls::default();
        let mut ok = github.start(Call::Token);
        ok.answered(200);
        ok.finish();
        let mut refused = github.start(Call::Api);
        refused.answered(500);
        drop(refused);
        let mut redirected = github.start(Call::Api);
        redirected.answered(302);
        drop(redirected);
        drop(github.start(Call::Identity));
        let mut cut = github.start(Call::Identity);
        cut.answered(200);
        cut.unread();
        drop(cut);
        let google = ProviderCalls::default();

        let text = render(&[("github", &github), ("google", &google)]);
        let line = |provider: &str, call: &str, outcome: &str, n: u64| {
            format!(
                "{CALLS}{{provider=\"{provider}\",call=\"{call}\",outcome=\"{outcome}\"}} {n}\n"
            )
        };
        for expected in [
            line("github", "token", "ok", 1),
            line("github", "token", "http_error", 0),
            line("github", "api", "http_error", 2),
            line("github", "identity", "transport", 2),
            line("github", "identity", "ok", 0),
            line("google", "lookup", "transport", 0),
        ] {
            assert!(text.contains(&expected), "{expected:?} in {text}");
        }
        assert!(
            text.contains(&format!(
                "{DURATION}_count{{provider=\"github\",call=\"api\"}} 2\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "{DURATION}_bucket{{provider=\"github\",call=\"token\",le=\"+Inf\"}} 1\n"
            )),
            "{text}"
        );
        assert!(
            !text.contains(&format!("{DURATION}_count{{provider=\"google\"")),
            "no histogram before a call: {text}"
        );
        assert!(!text.contains("call=\"refresh\",le="), "{text}");
    }

    #[test]
    fn the_time_counted_ends_at_finish() {
        let calls = ProviderCalls::default();
        let before = std::time::Instant::now();
        let mut timer = calls.start(Call::Revoke);
        std::thread::sleep(Duration::from_millis(20));
        timer.answered(204);
        timer.finish();
        let at_most = before.elapsed().as_secs_f64();
        std::thread::sleep(Duration::from_millis(300));
        let s = calls.durations(Call::Revoke.index());
        assert_eq!(s.count, 1);
        assert!(
            (0.02..=at_most).contains(&s.sum_seconds),
            "only the call's time (at most {at_most} s): {}",
            s.sum_seconds
        );
    }

    #[test]
    fn every_call_has_its_own_label() {
        let all = [
            Call::Token,
            Call::Refresh,
            Call::Identity,
            Call::Api,
            Call::Revoke,
            Call::Lookup,
            Call::TokenCheck,
        ];
        let mut seen: Vec<&str> = all.iter().map(|c| CALL_LABELS[c.index()]).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), CALL_LABELS.len());
        assert_eq!(CALL_LABELS[Call::Lookup.index()], "lookup");
        assert_eq!(CALL_LABELS[Call::TokenCheck.index()], "token_check");
    }
}
