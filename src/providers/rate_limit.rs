//! Whether a provider's answer says "too many requests", and for how long:
//! HTTP 429, or a 403 that carries the signs of a rate limit (GitHub
//! answers both its primary limit — `x-ratelimit-remaining: 0` — and its
//! secondary one — `retry-after` — with 403, which otherwise means a
//! permission the token lacks). The wait comes from `Retry-After` (seconds
//! or an HTTP date) or, failing that, `x-ratelimit-reset` (epoch seconds).

use chrono::{DateTime, Utc};
use reqwest::header::{HeaderMap, RETRY_AFTER};

/// The longest wait passed on: a day. A provider naming longer (or a
/// broken date) is still rate limiting, for "later".
const LONGEST_WAIT_SECS: u64 = 86_400;

/// A rate limit the provider reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimited {
    /// How long it asks to wait, when it says.
    pub retry_after_secs: Option<u64>,
}

/// The rate limit `status` and `headers` report, if any, as of `now`.
pub fn read(status: u16, headers: &HeaderMap, now: DateTime<Utc>) -> Option<RateLimited> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let retry_after = header(RETRY_AFTER.as_str()).and_then(|v| seconds_or_date(v, now));
    let exhausted = header("x-ratelimit-remaining") == Some("0");
    let limited = status == 429
        || (status == 403 && (exhausted || headers.contains_key(RETRY_AFTER)))
        || (status == 503 && retry_after.is_some());
    if !limited {
        return None;
    }
    let reset = || {
        header("x-ratelimit-reset")
            .and_then(|v| v.parse::<i64>().ok())
            // Any i64 a provider sends: saturating, a hostile one is "past".
            .map(|at| u64::try_from(at.saturating_sub(now.timestamp())).unwrap_or(0))
    };
    let wait = retry_after.or_else(|| exhausted.then(reset).flatten());
    Some(RateLimited {
        // A time already past (clocks apart) says nothing: "later".
        retry_after_secs: wait.filter(|w| *w > 0).map(|w| w.min(LONGEST_WAIT_SECS)),
    })
}

/// `Retry-After`'s value: delay seconds, or an HTTP date.
fn seconds_or_date(value: &str, now: DateTime<Utc>) -> Option<u64> {
    if let Ok(secs) = value.parse::<u64>() {
        return Some(secs);
    }
    let at = DateTime::parse_from_rfc2822(value).ok()?;
    Some(u64::try_from((at.with_timezone(&Utc) - now).num_seconds()).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-12-05T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn a_429_says_how_long_in_seconds_or_as_a_date() {
        let secs = read(429, &headers(&[("retry-after", "30")]), now());
        assert_eq!(secs.unwrap().retry_after_secs, Some(30));
        let date = read(
            429,
            &headers(&[("retry-after", "Sat, 05 Dec 2026 12:02:00 GMT")]),
            now(),
        );
        assert_eq!(date.unwrap().retry_after_secs, Some(120));
        let unsaid = read(429, &HeaderMap::new(), now());
        assert_eq!(unsaid.unwrap().retry_after_secs, None);
        let past = read(
            429,
            &headers(&[("retry-after", "Sat, 05 Dec 2026 11:00:00 GMT")]),
            now(),
        );
        assert_eq!(past.unwrap().retry_after_secs, None);
        let absurd = read(429, &headers(&[("retry-after", "99999999")]), now());
        assert_eq!(absurd.unwrap().retry_after_secs, Some(LONGEST_WAIT_SECS));
    }

    #[test]
    fn githubs_403_rate_limits_are_told_from_a_missing_permission() {
        let reset = (now().timestamp() + 600).to_string();
        let primary = read(
            403,
            &headers(&[
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", &reset),
            ]),
            now(),
        );
        assert_eq!(primary.unwrap().retry_after_secs, Some(600));
        let secondary = read(403, &headers(&[("retry-after", "60")]), now());
        assert_eq!(secondary.unwrap().retry_after_secs, Some(60));
        let permission = read(403, &headers(&[("x-ratelimit-remaining", "4999")]), now());
        assert_eq!(permission, None);
        for absurd in [i64::MIN.to_string(), i64::MAX.to_string()] {
            let limited = read(
                403,
                &headers(&[
                    ("x-ratelimit-remaining", "0"),
                    ("x-ratelimit-reset", &absurd),
                ]),
                now(),
            );
            let expected = (absurd.starts_with('9')).then_some(LONGEST_WAIT_SECS);
            assert_eq!(limited.unwrap().retry_after_secs, expected, "{absurd}");
        }
        assert_eq!(read(200, &headers(&[("retry-after", "5")]), now()), None);
        assert_eq!(read(503, &HeaderMap::new(), now()), None);
    }
}
