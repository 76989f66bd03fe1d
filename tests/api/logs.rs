//! Every log line the application writes during the test run, kept in
//! memory (at debug level for the service's own code) as well as printed,
//! so tests can prove that no secret ever reaches a log.
//!
//! One layer behind one filter, teeing each line to stderr when it is at
//! the level a run prints: with a layer per destination, each with its own
//! filter, `tracing-subscriber` dropped events from both (an access line
//! after a `sqlx` statement whose own event was filtered out, on the same
//! thread), and a check for secrets would not have seen them.

use std::{
    io::Write,
    sync::{Mutex, Once},
};

use tracing::{Level, Metadata};
use tracing_subscriber::{EnvFilter, fmt, fmt::MakeWriter, util::SubscriberInitExt};

static CAPTURED: Mutex<Vec<u8>> = Mutex::new(Vec::new());

/// Writes one line to the capture, and to stderr when `print` says.
struct Tee {
    print: bool,
}

impl Write for Tee {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        CAPTURED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        if self.print {
            let _ = std::io::stderr().write_all(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct MakeTee;

impl<'a> MakeWriter<'a> for MakeTee {
    type Writer = Tee;

    fn make_writer(&'a self) -> Tee {
        Tee { print: true }
    }

    /// Printed as a run would print it (`info,sqlx=warn`); captured whatever
    /// its level.
    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Tee {
        let quiet = if meta.target().starts_with("sqlx") {
            Level::WARN
        } else {
            Level::INFO
        };
        Tee {
            print: *meta.level() <= quiet,
        }
    }
}

/// As verbose as an operator could make it (`RUST_LOG=debug`, our own code
/// at trace; the service's own caps go over it in `init`); the test's HTTP
/// client (its cookie store logs the cookies it receives) is not the
/// service.
fn capture_filter() -> EnvFilter {
    EnvFilter::new(
        "debug,mcp_connect=trace,sqlx=info,hyper=info,h2=info,rustls=info,cookie_store=off",
    )
}

/// Installs the test run's subscriber once.
pub fn init() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let subscriber = fmt()
            .with_ansi(false)
            .with_writer(MakeTee)
            .with_env_filter(capture_filter())
            .finish();
        let _ = mcp_connect::telemetry::capped(subscriber).try_init();
    });
}

/// Everything captured so far.
pub fn captured() -> String {
    String::from_utf8_lossy(&CAPTURED.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
}

/// Panics if any of `secrets` appears in the captured logs.
pub fn assert_absent(secrets: &[String]) {
    let logs = captured();
    assert!(!logs.is_empty(), "logs were captured");
    for secret in secrets.iter().filter(|s| s.len() >= 8) {
        if let Some(line) = logs.lines().find(|l| l.contains(secret.as_str())) {
            // Name where it leaked, not the secret itself.
            let at = line.split(secret.as_str()).next().unwrap_or_default();
            let at: String = at
                .chars()
                .rev()
                .take(160)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            panic!("a secret reached the logs, after: {at}");
        }
    }
}
