//! Errors of the provider layer. Messages carry status codes, OAuth error
//! codes and scrubbed provider descriptions — never a token, code, verifier
//! or client secret — so callers may log them and show them.

/// A provider call failed.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// RFC 6749 `invalid_grant` (or a provider's own name for it): the code
    /// or refresh token is dead. The connection needs the user again.
    #[error("the provider refused the grant (invalid_grant); the account must be connected again")]
    InvalidGrant,
    /// The provider refused the access token (HTTP 401, Slack `invalid_auth`…).
    #[error("the provider refused the access token ({0})")]
    Denied(String),
    /// An OAuth error answer other than `invalid_grant`, or Slack's
    /// `ok: false`.
    #[error("the provider refused the request: {error}{}", describe(.description))]
    Rejected {
        error: String,
        description: Option<String>,
    },
    /// An unexpected HTTP status without an OAuth error in the body.
    #[error("the provider answered HTTP {0}")]
    Status(u16),
    /// The provider could not be reached or the transfer failed.
    #[error("cannot reach the provider ({})", http_kind(.0))]
    Http(#[source] reqwest::Error),
    /// The answer was not what the protocol promises.
    #[error("unexpected answer from the provider: {0}")]
    BadResponse(String),
    /// A value the entry learns after consent (Salesforce's org host, an
    /// Atlassian cloud id) was missing or did not match its parameter: the
    /// answer would steer later calls elsewhere. `label` names the
    /// parameter for the person; neither field holds the value.
    #[error("the provider named a {label} this server does not accept: {why}")]
    Unaccepted { label: String, why: String },
    #[error("path refused: {0}")]
    PathRefused(String),
    #[error("method `{0}` is not allowed for this provider")]
    MethodRefused(String),
    /// Query or body refused before anything was sent.
    #[error("request refused: {0}")]
    RequestRefused(String),
    /// The connection's own settings (a stored parameter, an identifier
    /// field) no longer pass the provider's entry, which was changed since
    /// (a host no longer allowed, say), or the entry lacks what they fill:
    /// nothing was sent, and no request can mend it.
    #[error("this connection's settings are not accepted any more: {0}")]
    SettingsRefused(String),
    /// The provider (as configured) has no such endpoint, e.g. revocation.
    #[error("this provider does not support {0}")]
    Unsupported(&'static str),
    /// The stored credential cannot be read as its entry says (stored by
    /// an entry since changed): nothing was sent.
    #[error("the stored credential cannot be used: {0}")]
    UnreadableCredential(&'static str),
}

impl ProviderError {
    /// Whether the request may have reached the provider (and been acted
    /// on) although no usable answer came: a timeout or a transfer cut
    /// after sending, not a refusal before sending or a failed connect.
    pub fn may_have_been_sent(&self) -> bool {
        match self {
            ProviderError::Http(e) => !e.is_connect() && !e.is_builder(),
            ProviderError::BadResponse(_) => true,
            _ => false,
        }
    }

    /// Whether the provider is only failing for now — unreachable, slow,
    /// answering 5xx or 429, or an OAuth `server_error` /
    /// `temporarily_unavailable` — so that the same request may work later.
    /// A refusal (a wrong client secret, a grant type it does not take) is
    /// not: it stays until someone changes something.
    pub fn is_passing(&self) -> bool {
        match self {
            ProviderError::Http(_) | ProviderError::BadResponse(_) => true,
            ProviderError::Status(status) => *status >= 500 || *status == 429,
            ProviderError::Rejected { error, .. } => {
                matches!(error.as_str(), "server_error" | "temporarily_unavailable")
            }
            _ => false,
        }
    }

    /// Whether a token endpoint refused this server itself rather than the
    /// grant: its client authentication (`invalid_client`, a 401 without
    /// an OAuth error), or what the client may ask (`unauthorized_client`,
    /// `unsupported_grant_type`). Only the server's operator can mend it.
    pub fn refuses_the_client(&self) -> bool {
        match self {
            ProviderError::Status(status) => *status == 401,
            ProviderError::Rejected { error, .. } => matches!(
                error.as_str(),
                "invalid_client" | "unauthorized_client" | "unsupported_grant_type"
            ),
            _ => false,
        }
    }

    /// Wraps a transport error without its URL: API URLs carry the model's
    /// path and query, which have no business in logs.
    pub(super) fn http(e: reqwest::Error) -> Self {
        ProviderError::Http(e.without_url())
    }
}

fn describe(description: &Option<String>) -> String {
    description
        .as_deref()
        .map(|d| format!(" ({d})"))
        .unwrap_or_default()
}

fn http_kind(e: &reqwest::Error) -> &'static str {
    if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else if e.is_body() || e.is_decode() {
        "reading the answer failed"
    } else {
        "request failed"
    }
}

/// A provider's settings cannot work. Displays as the other settings'
/// errors do: ``setting `providers.<name>.<field>`: <message>``.
#[derive(Debug, thiserror::Error)]
pub enum ProviderConfigError {
    #[error(
        "setting `providers.{provider}.{field}`: {}",
        crate::config::without_userinfo(message)
    )]
    Invalid {
        provider: String,
        field: String,
        message: String,
    },
}

/// An OAuth `error` code fit for a message: RFC 6749 limits it to printable
/// ASCII; anything else, or anything long, is cut.
pub(super) fn clean_code(code: &str) -> String {
    code_characters(code).chars().take(64).collect()
}

/// [`clean_code`] of a code that may echo what we sent, with every such
/// secret replaced: looked for after the filter, both as it was sent and
/// as the filter leaves it, so that an echo with characters put in (or
/// taken out) that the filter drops is still found.
pub(super) fn clean_code_without(code: &str, secrets: &[&str]) -> String {
    let mut code = code_characters(code);
    for secret in secrets {
        for form in [secret.to_string(), code_characters(secret)] {
            if form.len() >= 4 {
                code = code.replace(&form, "redacted");
            }
        }
    }
    code.chars().take(64).collect()
}

fn code_characters(code: &str) -> String {
    code.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
        .collect()
}

/// A provider's free-text description fit for a message: without control
/// characters, bounded, and with every secret we sent replaced (a provider
/// that echoes the code or token must not put it into our logs).
pub(super) fn clean_description(text: &str, secrets: &[&str]) -> String {
    // Secrets out before the cut: one straddling it would keep a part.
    let mut text: String = text.chars().filter(|c| !c.is_control()).collect();
    for secret in secrets.iter().filter(|s| s.len() >= 4) {
        text = text.replace(secret, "***");
    }
    text.chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_refusal_of_the_client_is_the_operators() {
        let rejected = |error: &str| ProviderError::Rejected {
            error: error.into(),
            description: None,
        };
        for client in [
            rejected("invalid_client"),
            rejected("unauthorized_client"),
            rejected("unsupported_grant_type"),
            ProviderError::Status(401),
        ] {
            assert!(client.refuses_the_client(), "{client}");
        }
        for other in [
            rejected("invalid_request"),
            rejected("invalid_scope"),
            ProviderError::Status(400),
            ProviderError::InvalidGrant,
        ] {
            assert!(!other.refuses_the_client(), "{other}");
        }
    }

    #[test]
    fn only_an_outage_passes() {
        for passing in [
            ProviderError::Status(503),
            ProviderError::Status(429),
            ProviderError::BadResponse("html".into()),
            ProviderError::Rejected {
                error: "temporarily_unavailable".into(),
                description: None,
            },
        ] {
            assert!(passing.is_passing(), "{passing}");
        }
        for lasting in [
            ProviderError::Status(400),
            ProviderError::InvalidGrant,
            ProviderError::Rejected {
                error: "invalid_client".into(),
                description: None,
            },
            ProviderError::Unsupported("refresh"),
        ] {
            assert!(!lasting.is_passing(), "{lasting}");
        }
    }

    #[test]
    fn a_credential_that_cannot_be_read_was_never_sent() {
        let e = ProviderError::UnreadableCredential("it is not a set of fields");
        assert!(!e.may_have_been_sent());
        assert!(ProviderError::BadResponse("x".into()).may_have_been_sent());
    }

    #[test]
    fn a_secret_across_the_cut_leaves_no_part_of_itself() {
        let secret = "SECRETTOKEN123";
        let text = format!("{}{secret} and more", "x".repeat(290));
        let cleaned = clean_description(&text, &[secret]);
        assert!(!cleaned.contains("SECRET"), "{cleaned}");
        assert!(
            cleaned.ends_with("***") || cleaned.contains("*** and"),
            "{cleaned}"
        );
    }

    #[test]
    fn descriptions_lose_secrets_and_controls() {
        let d = clean_description("code abc123 is bad\n\u{7}", &["abc123", ""]);
        assert_eq!(d, "code *** is bad");
        assert_eq!(clean_code("invalid_grant\"<b>"), "invalid_grantb");
    }

    #[test]
    fn config_error_names_the_setting() {
        let e = ProviderConfigError::Invalid {
            provider: "github".into(),
            field: "client_secret".into(),
            message: "required by the github preset".into(),
        };
        assert_eq!(
            e.to_string(),
            "setting `providers.github.client_secret`: required by the github preset"
        );
    }
}
