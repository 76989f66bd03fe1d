//! Reading a token endpoint's answer, quirks included: GitHub answers
//! form-encoded unless asked for JSON and reports errors with HTTP 200;
//! Slack wraps everything in `{"ok": …}` and nests the user token under
//! `authed_user`; some servers send `expires_in` as a string.

use std::time::Duration;

use secrecy::SecretString;
use serde_json::{Map, Value};

use super::{
    ProviderError, TokenSet,
    error::{clean_code, clean_code_without, clean_description},
};

/// Error codes that mean what RFC 6749's `invalid_grant` means: the code or
/// refresh token is dead, only the user can fix it.
const INVALID_GRANT: &[&str] = &[
    "invalid_grant",
    // GitHub
    "bad_verification_code",
    "bad_refresh_token",
    // Slack
    "invalid_code",
    "code_already_used",
    "invalid_refresh_token",
    // Microsoft: a Conditional Access or multi-factor prompt, or consent
    // the user must give again — at the token endpoint too, where a
    // refresh can never get past it.
    "interaction_required",
    "consent_required",
];

/// What came back from the token endpoint.
pub(super) struct Answer<'a> {
    pub status: u16,
    pub media_type: Option<&'a str>,
    pub body: &'a [u8],
    /// `{"ok": false}` means refused (Slack).
    pub ok_envelope: bool,
    /// Where the user's token sits when not at the top level (Slack's
    /// `/authed_user`).
    pub token_pointer: Option<&'a str>,
    /// Form-encoded answers are accepted (GitHub).
    pub form_answers: bool,
    /// Refusals that mean the grant is dead, in the provider's own words:
    /// a JSON pointer into the answer and the string found there.
    pub dead_grant: &'a [(String, String)],
}

/// Parses a token answer; `sent` are the secrets of the request (code,
/// verifier, refresh token, client secret), kept out of error messages.
#[cfg(test)]
pub(super) fn parse(answer: &Answer<'_>, sent: &[&str]) -> Result<TokenSet, ProviderError> {
    parse_keeping_fields(answer, sent).map(|(tokens, _)| tokens)
}

/// [`parse`], also answering the whole answer, where an entry may learn
/// values such as Salesforce's `instance_url`.
pub(super) fn parse_keeping_fields(
    answer: &Answer<'_>,
    sent: &[&str],
) -> Result<(TokenSet, Value), ProviderError> {
    let success = (200..300).contains(&answer.status);
    let fields = match fields(answer) {
        Ok(fields) => fields,
        Err(_) if !success => return Err(ProviderError::Status(answer.status)),
        Err(e) => return Err(e),
    };
    // A rate limit or a failing endpoint may say so with an error body
    // (Slack: `{"ok":false,"error":"ratelimited"}` with 429): that is a
    // passing answer, by its status, unless it says the grant is dead.
    let passing = answer.status == 429 || answer.status >= 500;
    if !success && !passing && says_dead_grant(answer.dead_grant, &fields) {
        return Err(ProviderError::InvalidGrant);
    }
    let refused = |e: ProviderError| match e {
        ProviderError::InvalidGrant => e,
        _ if passing => ProviderError::Status(answer.status),
        _ => e,
    };
    if let Some(error) = fields.get("error").and_then(Value::as_str) {
        return Err(refused(oauth_error(
            error,
            fields.get("error_description"),
            sent,
        )));
    }
    if answer.ok_envelope && fields.get("ok") == Some(&Value::Bool(false)) {
        return Err(refused(oauth_error("unknown_error", None, sent)));
    }
    if !success {
        return Err(ProviderError::Status(answer.status));
    }
    // Slack: the user token is under `authed_user`; a top-level token, if
    // any, is the bot's. A refresh of a user token answers flat. An answer
    // that names the user but grants them no token (no user scopes were
    // asked for) grants the person nothing: its top-level token is the
    // workspace's bot, not theirs to be stored as their connection.
    let root = Value::Object(fields);
    let named = answer.token_pointer.and_then(|p| root.pointer(p));
    let nested = named.and_then(Value::as_object);
    if named.is_some() && !nested.is_some_and(|user| user.contains_key("access_token")) {
        return Err(ProviderError::BadResponse(
            "the token answer grants the person no token of their own (were no user scopes asked for?)"
                .into(),
        ));
    }
    let token = match (nested, root.as_object()) {
        (Some(user), _) => user,
        (None, Some(top)) => top,
        (None, None) => {
            return Err(ProviderError::BadResponse(
                "the token answer is not an object".into(),
            ));
        }
    };
    let access_token = string(token, "access_token")
        .ok_or_else(|| ProviderError::BadResponse("the token answer has no access_token".into()))?;
    let tokens = TokenSet {
        access_token: SecretString::from(access_token),
        refresh_token: string(token, "refresh_token").map(SecretString::from),
        expires_in: token.get("expires_in").and_then(seconds),
        received: std::time::Instant::now(),
        // An empty `scope` is an answer too: nothing was granted.
        scopes: token.get("scope").and_then(Value::as_str).map(|s| {
            // Space per RFC 6749; GitHub and Slack use commas.
            s.split([' ', ','])
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        }),
        token_type: string(token, "token_type").unwrap_or_else(|| "Bearer".to_owned()),
    };
    Ok((tokens, root))
}

/// Whether a refusal's fields say the grant is dead in one of the entry's
/// own ways (`{"message": "Invalid refresh token"}`).
fn says_dead_grant(dead_grant: &[(String, String)], fields: &Map<String, Value>) -> bool {
    if dead_grant.is_empty() {
        return false;
    }
    let answer = Value::Object(fields.clone());
    dead_grant
        .iter()
        .any(|(pointer, value)| answer.pointer(pointer).and_then(Value::as_str) == Some(value))
}

/// The answer's fields, from JSON or from a form-encoded body.
fn fields(answer: &Answer<'_>) -> Result<Map<String, Value>, ProviderError> {
    let looks_json = answer.body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    match answer.media_type {
        Some(m) if super::http::is_json(Some(m)) || looks_json => json(answer.body),
        None if looks_json => json(answer.body),
        Some("application/x-www-form-urlencoded" | "text/plain") | None if answer.form_answers => {
            Ok(url::form_urlencoded::parse(answer.body)
                .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
                .collect())
        }
        other => Err(ProviderError::BadResponse(format!(
            "the token answer has media type {}",
            clean_code(other.unwrap_or("(none)"))
        ))),
    }
}

fn json(body: &[u8]) -> Result<Map<String, Value>, ProviderError> {
    match serde_json::from_slice(body) {
        Ok(Value::Object(map)) => Ok(map),
        // Never echo the parse error: it quotes the body, which may hold a token.
        _ => Err(ProviderError::BadResponse(
            "the token answer is not a JSON object".into(),
        )),
    }
}

pub(super) fn oauth_error(code: &str, description: Option<&Value>, sent: &[&str]) -> ProviderError {
    if INVALID_GRANT.contains(&code) {
        return ProviderError::InvalidGrant;
    }
    // The code goes into messages and logs as the description does: a
    // provider that echoes what we sent in it must not put that there.
    ProviderError::Rejected {
        error: clean_code_without(code, sent),
        description: description
            .and_then(Value::as_str)
            .map(|d| clean_description(d, sent))
            .filter(|d| !d.is_empty()),
    }
}

fn string(map: &Map<String, Value>, key: &str) -> Option<String> {
    map.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

fn seconds(value: &Value) -> Option<Duration> {
    let secs = match value {
        Value::Number(n) => n.as_u64().or_else(|| n.as_f64().map(|f| f.max(0.0) as u64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }?;
    Some(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use super::*;

    fn answer<'a>(status: u16, media_type: Option<&'a str>, body: &'a str) -> Answer<'a> {
        Answer {
            status,
            media_type,
            body: body.as_bytes(),
            ok_envelope: false,
            token_pointer: None,
            form_answers: true,
            dead_grant: &[],
        }
    }

    /// A dead refresh token as Strava and Twitch say it: a 400 that is no
    /// `invalid_grant`. Their entries name it; nothing else does, and the
    /// same words in a passing answer (429, 5xx) or a success do not.
    #[test]
    fn a_dead_grant_in_the_providers_own_words_is_invalid_grant() {
        let strava = r#"{"message":"Bad Request","errors":[{"resource":"RefreshToken","field":"refresh_token","code":"invalid"}]}"#;
        let twitch = r#"{"error":"Bad Request","status":400,"message":"Invalid refresh token"}"#;
        // X's: an RFC 6749 error, but not the RFC's code for it.
        let x = r#"{"error":"invalid_request","error_description":"Value passed for the token was invalid."}"#;
        let entries = [
            ("/errors/0/field".to_owned(), "refresh_token".to_owned()),
            ("/message".to_owned(), "Invalid refresh token".to_owned()),
            (
                "/error_description".to_owned(),
                "Value passed for the token was invalid.".to_owned(),
            ),
        ];
        for body in [strava, twitch, x] {
            let mut a = answer(400, Some("application/json"), body);
            assert!(
                !matches!(parse(&a, &[]), Err(ProviderError::InvalidGrant)),
                "without the entry's words: {body}"
            );
            a.dead_grant = &entries;
            assert!(
                matches!(parse(&a, &[]), Err(ProviderError::InvalidGrant)),
                "{body}"
            );
            for passing in [429, 503] {
                a.status = passing;
                assert!(
                    matches!(parse(&a, &[]), Err(ProviderError::Status(s)) if s == passing),
                    "{passing}: {body}"
                );
            }
        }
        // Another refusal of the same provider is not a dead grant.
        let other = r#"{"message":"Bad Request","errors":[{"resource":"Application","field":"client_id","code":"invalid"}]}"#;
        let mut a = answer(400, Some("application/json"), other);
        a.dead_grant = &entries;
        assert!(matches!(parse(&a, &[]), Err(ProviderError::Status(400))));
    }

    #[test]
    fn form_encoded_answers_parse() {
        let a = answer(
            200,
            Some("application/x-www-form-urlencoded"),
            "access_token=gho_16C7e42F292c6912E7710c838347Ae178B4a&scope=repo%2Cgist&token_type=bearer",
        );
        let t = parse(&a, &[]).unwrap();
        assert_eq!(
            t.access_token.expose_secret(),
            "gho_16C7e42F292c6912E7710c838347Ae178B4a"
        );
        assert_eq!(t.scopes.unwrap(), vec!["repo", "gist"]);
        assert_eq!(t.token_type, "bearer");
        assert!(t.expires_in.is_none() && t.refresh_token.is_none());
    }

    #[test]
    fn form_answers_only_where_the_entry_names_them() {
        let body = "access_token=at&token_type=bearer";
        let mut a = answer(200, Some("application/x-www-form-urlencoded"), body);
        a.form_answers = false;
        assert!(matches!(parse(&a, &[]), Err(ProviderError::BadResponse(_))));
        let mut a = answer(200, None, body);
        a.form_answers = false;
        assert!(matches!(parse(&a, &[]), Err(ProviderError::BadResponse(_))));
    }

    #[test]
    fn a_nested_token_is_read_at_its_pointer() {
        let body = r#"{"ok":true,"access_token":"xoxb-bot","authed_user":{"access_token":"xoxp-user","scope":"a,b"}}"#;
        let mut a = answer(200, Some("application/json"), body);
        a.token_pointer = Some("/authed_user");
        let t = parse(&a, &[]).unwrap();
        assert_eq!(t.access_token.expose_secret(), "xoxp-user");
        assert_eq!(t.scopes.unwrap(), ["a", "b"]);
        a.token_pointer = None;
        assert_eq!(
            parse(&a, &[]).unwrap().access_token.expose_secret(),
            "xoxb-bot"
        );
        // A refresh answers flat: the top-level token is the person's.
        let flat = r#"{"ok":true,"access_token":"xoxe.xoxp-user","token_type":"user"}"#;
        let mut a = answer(200, Some("application/json"), flat);
        a.token_pointer = Some("/authed_user");
        assert_eq!(
            parse(&a, &[]).unwrap().access_token.expose_secret(),
            "xoxe.xoxp-user"
        );
        // The person named, with no token of theirs: the bot's is not theirs.
        for user in [r#"{"id":"U1"}"#, "null", r#""U1""#] {
            let bot_only =
                format!(r#"{{"ok":true,"access_token":"xoxb-bot","authed_user":{user}}}"#);
            let mut a = answer(200, Some("application/json"), &bot_only);
            a.token_pointer = Some("/authed_user");
            assert!(
                matches!(parse(&a, &[]), Err(ProviderError::BadResponse(_))),
                "{user}"
            );
        }
    }

    #[test]
    fn errors_in_200_answers_are_errors() {
        let a = answer(
            200,
            Some("application/x-www-form-urlencoded"),
            "error=incorrect_client_credentials&error_description=The+client_id+and%2For+client_secret+passed+are+incorrect.",
        );
        let e = parse(&a, &[]).unwrap_err();
        assert!(
            matches!(&e, ProviderError::Rejected { error, .. } if error == "incorrect_client_credentials"),
            "{e}"
        );
        let a = answer(
            200,
            Some("application/json"),
            r#"{"error":"bad_refresh_token"}"#,
        );
        assert!(matches!(parse(&a, &[]), Err(ProviderError::InvalidGrant)));
    }

    #[test]
    fn a_secret_echoed_as_the_error_code_is_redacted() {
        for body in [
            r#"{"error":"rt-SECRET-123"}"#,
            r#"{"error":"invalid_request:rt-SECRET-123","error_description":"rt-SECRET-123"}"#,
            // Characters the code's filter drops, put in or taken out.
            r#"{"error":"rt-SEC RET-123"}"#,
            r#"{"error":"rt-SECRET-123ab"}"#,
        ] {
            let a = answer(400, Some("application/json"), body);
            let e = parse(&a, &["rt-SECRET-123", "rt-SECRET-123a/b"]).unwrap_err();
            let shown = format!("{e} {e:?}");
            assert!(!shown.contains("SECRET"), "{shown}");
            assert!(shown.contains("redacted"), "{shown}");
        }
    }

    #[test]
    fn a_refresh_that_needs_the_user_is_a_dead_grant() {
        for code in ["interaction_required", "consent_required"] {
            let body = format!(r#"{{"error":"{code}","error_description":"AADSTS50076"}}"#);
            let a = answer(400, Some("application/json"), &body);
            assert!(
                matches!(parse(&a, &[]), Err(ProviderError::InvalidGrant)),
                "{code}"
            );
        }
    }

    #[test]
    fn string_expiry_and_unparseable_bodies() {
        let a = answer(
            200,
            None,
            r#"{"access_token":"at","expires_in":"3600","token_type":"Bearer"}"#,
        );
        let t = parse(&a, &[]).unwrap();
        assert_eq!(t.expires_in, Some(Duration::from_secs(3600)));
        let a = answer(
            200,
            Some("application/json"),
            r#"{"access_token":"at-secret""#,
        );
        let e = parse(&a, &[]).unwrap_err();
        assert!(!e.to_string().contains("at-secret"), "{e}");
        let a = answer(502, Some("text/html"), "<html>bad gateway</html>");
        assert!(matches!(parse(&a, &[]), Err(ProviderError::Status(502))));
        let a = answer(200, Some("application/json"), r#"{"token_type":"bearer"}"#);
        assert!(matches!(parse(&a, &[]), Err(ProviderError::BadResponse(_))));
    }

    #[test]
    fn an_error_body_with_a_passing_status_is_a_passing_answer() {
        for (status, body) in [
            (429, r#"{"ok":false,"error":"ratelimited"}"#),
            (503, r#"{"error":"backend_error"}"#),
            (500, r#"{"error":"invalid_client"}"#),
        ] {
            let mut a = answer(status, Some("application/json"), body);
            a.ok_envelope = true;
            let e = parse(&a, &[]).unwrap_err();
            assert!(
                matches!(e, ProviderError::Status(s) if s == status),
                "{body}: {e}"
            );
            assert!(e.is_passing(), "{body}");
        }
        // A dead grant stays dead whatever the status.
        let a = answer(
            503,
            Some("application/json"),
            r#"{"error":"invalid_grant"}"#,
        );
        assert!(matches!(parse(&a, &[]), Err(ProviderError::InvalidGrant)));
        // A refusal with a client error status is lasting.
        let a = answer(
            401,
            Some("application/json"),
            r#"{"error":"invalid_client"}"#,
        );
        let e = parse(&a, &[]).unwrap_err();
        assert!(!e.is_passing(), "{e}");
    }

    #[test]
    fn descriptions_never_echo_what_we_sent() {
        let a = answer(
            400,
            Some("application/json"),
            r#"{"error":"invalid_request","error_description":"code c0de-123 malformed"}"#,
        );
        let e = parse(&a, &["c0de-123"]).unwrap_err().to_string();
        assert!(!e.contains("c0de-123"), "{e}");
        assert!(e.contains("invalid_request"), "{e}");
    }
}
