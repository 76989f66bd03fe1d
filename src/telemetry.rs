//! Logging: JSON lines (or pretty text) to stderr through `tracing`.
//! `RUST_LOG` filters; the default is `info,sqlx=warn`.
//!
//! Whatever `RUST_LOG` says, the MCP library's own logs stay at `info`: at
//! `debug` and below it prints whole JSON-RPC messages, and ours carry
//! one-time connect links and sealed state. The caps are a filter of their
//! own over `RUST_LOG`'s (see [`capped`]), not more directives in it: there
//! a more specific directive (`rmcp::transport=trace`) would win.

mod batched;

pub use batched::BatchedWriter;

use tracing_subscriber::{
    EnvFilter,
    filter::{LevelFilter, Targets},
    fmt,
    layer::{Layered, SubscriberExt},
};

use crate::config::LogFormat;

/// `subscriber` with the caps over whatever it lets through: an event the
/// caps refuse is not recorded, whatever `RUST_LOG` enabled. The MCP
/// library (`rmcp`) at `debug` and below prints whole JSON-RPC messages:
/// `info` at most. `rmcp::service` also announces every stateless request
/// at `info`, with a reconstructed (and so misleading) client description,
/// and logs every JSON-RPC error it sends at `warn` — whole, so a legacy
/// client's `-32042` with its connect link would land in the log: errors
/// only. The endpoint logs the requests itself (see `mcp::server`).
pub fn capped<S>(subscriber: S) -> Layered<Targets, S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    // As verbose as the subscriber is and no more: the subscriber's level
    // hint stays what `RUST_LOG` made it, so disabled events (and the
    // `log` records of dependencies) still stop at the cheapest check.
    let level = subscriber.max_level_hint().unwrap_or(LevelFilter::TRACE);
    let caps = Targets::new()
        .with_default(level)
        .with_target("rmcp", LevelFilter::INFO.min(level))
        .with_target("rmcp::service", LevelFilter::ERROR.min(level))
        // Its warnings quote what a request sent, whole (an `initialize`'s
        // protocol version, a Host or Origin header): the bridge checks
        // those first and the access line records the refusal.
        .with_target(
            "rmcp::transport::streamable_http_server",
            LevelFilter::ERROR.min(level),
        )
        // Its warning about a malformed `~/.pgpass` line quotes the line
        // whole, password included.
        .with_target(
            "sqlx_postgres::options::pgpass",
            LevelFilter::ERROR.min(level),
        );
    subscriber.with(caps)
}

/// `RUST_LOG`, or `default` (the caps go over it: [`capped`]).
fn filter(default: &str) -> EnvFilter {
    EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default))
}

/// Logging for short commands: each line is written as it is made.
pub fn init(format: LogFormat) {
    install(format, std::io::stderr);
}

/// Keeps the serving process's log writer alive; dropping it writes out
/// what is still queued. Hold it until the process is done.
#[must_use = "logs still queued are lost when the guard is dropped early"]
pub struct LogGuard(#[allow(dead_code)] Option<batched::WriterGuard>);

/// Where a serving process with JSON logs queues lines it formats itself
/// (the per-request access line, see [`json_lines`]).
static JSON_LINES: std::sync::OnceLock<batched::BatchedWriter> = std::sync::OnceLock::new();

/// The serving process's line queue when its logs are JSON: a hot path may
/// format its own line, exactly as `tracing`'s JSON formatter would, and
/// queue it without the event machinery (after checking the filter with
/// `tracing::enabled!`). `None` elsewhere (pretty logs, short commands,
/// tests with their own subscriber): emit the `tracing` event.
pub fn json_lines() -> Option<&'static batched::BatchedWriter> {
    JSON_LINES.get()
}

/// Logging for a serving process. Request handlers queue their lines for a
/// writer thread instead of making a system call each (see `batched`).
pub fn init_for_serving(format: LogFormat) -> LogGuard {
    match batched::spawn(std::io::stderr()) {
        Ok((writer, guard)) => {
            let queue = writer.clone();
            // Only where this writer is the process's subscriber: under
            // another one (tests that capture logs) lines go through it.
            if install(format, writer) && format == LogFormat::Json {
                let _ = JSON_LINES.set(queue);
            }
            LogGuard(Some(guard))
        }
        // No thread to be had: write directly.
        Err(_) => {
            install(format, std::io::stderr);
            LogGuard(None)
        }
    }
}

/// How the `pretty` format writes an event's message and fields: like the
/// default, but with every control character (newline, carriage return,
/// ANSI escape…) and Unicode line or direction mark escaped, so a string a
/// client sent (a path, an OAuth `error`) cannot forge a line or repaint a
/// terminal. The JSON format escapes them already.
pub fn pretty_fields()
-> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> + Send + Sync + 'static {
    tracing_subscriber::fmt::format::debug_fn(|writer, field, value| {
        let name = field.name();
        // What the `log` bridge adds; the formatter shows it already.
        if name.starts_with("log.") {
            return Ok(());
        }
        let raw = format!("{value:?}");
        let text = escape_controls(&raw);
        if name == "message" {
            write!(writer, "{text}")
        } else {
            write!(writer, " {}={text}", name.trim_start_matches("r#"))
        }
    })
}

/// `text` with control characters and invisible line or direction marks
/// written as escapes.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| {
        c.is_control()
            || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if unsafe_char(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// An HTTP method as the access lines name it: one of the standard methods
/// (RFC 9110's, and PATCH), or `other`. actix takes any token as a method,
/// as long as a whole request head: the sender's text, of any length,
/// which a log line does not hold.
pub fn http_method(method: &str) -> &'static str {
    const STANDARD: [&str; 9] = [
        "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
    ];
    STANDARD
        .into_iter()
        .find(|m| *m == method)
        .unwrap_or("other")
}

/// Installs the global subscriber; false when one was installed already.
fn install<W>(format: LogFormat, writer: W) -> bool
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = fmt()
        .with_env_filter(filter(
            "info,sqlx=warn,sqlx_postgres::options::pgpass=error",
        ))
        .with_writer(writer)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(true);
    use tracing_subscriber::util::SubscriberInitExt;
    // A second init (tests that start several apps) is not an error.
    match format {
        LogFormat::Json => capped(builder.json().flatten_event(true).finish()).try_init(),
        LogFormat::Pretty => {
            capped(builder.compact().fmt_fields(pretty_fields()).finish()).try_init()
        }
    }
    .is_ok()
}

#[cfg(test)]
mod tests {
    use super::{capped, escape_controls};
    use tracing::Level;
    use tracing_subscriber::{EnvFilter, layer::SubscriberExt};

    /// Whether an event of the MCP library's transport (which prints whole
    /// JSON-RPC answers at trace, connect links included) would be
    /// recorded under `rust_log`.
    fn transport_trace_recorded(rust_log: &str) -> bool {
        let subscriber = capped(tracing_subscriber::registry().with(EnvFilter::new(rust_log)));
        tracing::subscriber::with_default(subscriber, || {
            tracing::enabled!(
                target: "rmcp::transport::streamable_http_server::tower",
                Level::TRACE
            )
        })
    }

    #[test]
    fn no_rust_log_lets_the_mcp_library_print_whole_messages() {
        for rust_log in [
            "trace",
            "info,rmcp::transport=trace",
            "rmcp::transport::streamable_http_server=trace",
        ] {
            assert!(!transport_trace_recorded(rust_log), "{rust_log}");
        }
        // The caps do not silence the rest of the log.
        let subscriber = capped(tracing_subscriber::registry().with(EnvFilter::new("debug")));
        tracing::subscriber::with_default(subscriber, || {
            assert!(tracing::enabled!(target: "mcp_connect::web", Level::DEBUG));
            assert!(tracing::enabled!(target: "rmcp::transport", Level::INFO));
            assert!(!tracing::enabled!(target: "rmcp::service", Level::WARN));
            // The password file's reader quotes a malformed line whole.
            assert!(!tracing::enabled!(
                target: "sqlx_postgres::options::pgpass",
                Level::WARN
            ));
            assert!(tracing::enabled!(
                target: "sqlx_postgres::options::pgpass",
                Level::ERROR
            ));
        });
        // Nor do they make it more verbose than RUST_LOG says.
        let subscriber = capped(tracing_subscriber::registry().with(EnvFilter::new("warn")));
        assert_eq!(
            tracing::Subscriber::max_level_hint(&subscriber),
            Some(tracing_subscriber::filter::LevelFilter::WARN)
        );
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape_controls("plain text"), "plain text");
        assert_eq!(
            escape_controls("x\nINFO forged\u{1b}[31m\r\u{2028}"),
            "x\\nINFO forged\\u{1b}[31m\\r\\u{2028}"
        );
    }
}
