//! Logging: JSON lines (or pretty text) to stderr through `tracing`.
//! `RUST_LOG` filters; the default is `info`.

use tracing_subscriber::{EnvFilter, fmt};

use crate::config::LogFormat;

pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let builder = fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(true);
    // A second init (tests that start several apps) is not an error.
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Pretty => builder.compact().try_init(),
    };
}
