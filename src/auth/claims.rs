//! What a token must say, and reading it into a [`Principal`]: issuer,
//! audience, lifetime, subject, client and scopes. Shared by the JWT path
//! (after the signature is checked) and the introspection path.

use serde_json::{Map, Value};
use url::Url;

use super::{AuthError, Principal, configured_issuer};

pub(crate) type Claims = Map<String, Value>;

/// The expectations every accepted token meets, from configuration.
#[derive(Debug, Clone)]
pub(crate) struct Expected {
    pub issuer: Url,
    pub audience: String,
    pub subject_claim: String,
    pub leeway_secs: u64,
}

/// Issuers compare exactly, except that one trailing `/` is ignored on
/// either side: `Url` adds it to a bare host, while most issuers omit it.
pub(crate) fn issuer_matches(configured: &Url, iss: &str) -> bool {
    let trim = |s: &str| s.strip_suffix('/').unwrap_or(s).to_owned();
    trim(configured.as_str()) == trim(iss)
}

/// `aud` as a string or an array of strings; it must contain `audience`
/// exactly (no normalisation: RFC 8707 resource indicators are compared as
/// strings).
pub(crate) fn audience_contains(aud: &Value, audience: &str) -> Result<bool, AuthError> {
    match aud {
        Value::String(s) => Ok(s == audience),
        Value::Array(items) => {
            let mut found = false;
            for item in items {
                let s = item
                    .as_str()
                    .ok_or_else(|| AuthError::InvalidClaim("aud".into()))?;
                found |= s == audience;
            }
            Ok(found)
        }
        _ => Err(AuthError::InvalidClaim("aud".into())),
    }
}

/// Checks `exp` (when present, or when `required`) and `nbf` against `now`,
/// both with the configured leeway. Returns `exp`.
pub(crate) fn check_lifetime(
    claims: &Claims,
    now: u64,
    leeway: u64,
    required: bool,
) -> Result<Option<u64>, AuthError> {
    let exp = numeric(claims, "exp")?;
    match exp {
        None if required => return Err(AuthError::MissingClaim("exp".into())),
        Some(exp) if exp.saturating_add(leeway) < now => return Err(AuthError::Expired),
        _ => {}
    }
    if numeric(claims, "nbf")?.is_some_and(|nbf| nbf > now.saturating_add(leeway)) {
        return Err(AuthError::NotYetValid);
    }
    Ok(exp)
}

fn numeric(claims: &Claims, name: &str) -> Result<Option<u64>, AuthError> {
    match claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.is_finite() && *f >= 0.0)
                    .map(|f| f as u64)
            })
            .map(Some)
            .ok_or_else(|| AuthError::InvalidClaim(name.into())),
        Some(_) => Err(AuthError::InvalidClaim(name.into())),
    }
}

/// Reads the principal. `iss` is required for JWTs; an introspection answer
/// may omit it (`iss_optional`), and then the configured issuer stands in.
pub(crate) fn principal(
    claims: &Claims,
    expected: &Expected,
    iss_optional: bool,
) -> Result<Principal, AuthError> {
    let issuer = match claims.get("iss") {
        // One spelling everywhere (the web sign-in uses the same): users are
        // identified by (issuer, subject), so `…/` and `…` must not be two.
        Some(Value::String(iss)) if issuer_matches(&expected.issuer, iss) => {
            configured_issuer(&expected.issuer)
        }
        Some(Value::String(_)) => return Err(AuthError::WrongIssuer),
        None if iss_optional => configured_issuer(&expected.issuer),
        None => return Err(AuthError::MissingClaim("iss".into())),
        Some(_) => return Err(AuthError::InvalidClaim("iss".into())),
    };
    let subject = non_empty_string(claims, &expected.subject_claim)?
        .ok_or_else(|| AuthError::MissingClaim(expected.subject_claim.clone()))?;
    // RFC 9068 names `client_id`; OpenID-style issuers send `azp` instead.
    let client_id = match non_empty_string(claims, "client_id")? {
        Some(id) => id,
        None => non_empty_string(claims, "azp")?
            .ok_or_else(|| AuthError::MissingClaim("client_id".into()))?,
    };
    Ok(Principal {
        issuer,
        subject,
        client_id,
        scopes: scopes(claims)?,
    })
}

fn non_empty_string(claims: &Claims, name: &str) -> Result<Option<String>, AuthError> {
    match claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
        Some(_) => Err(AuthError::InvalidClaim(name.into())),
    }
}

/// `scope` (RFC 9068, space-separated) or `scp` (Entra, Okta: an array, or
/// sometimes a space-separated string).
fn scopes(claims: &Claims) -> Result<Vec<String>, AuthError> {
    let split = |s: &str| s.split_ascii_whitespace().map(str::to_owned).collect();
    match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(s)), _) => Ok(split(s)),
        (Some(Value::Null) | None, Some(Value::String(s))) => Ok(split(s)),
        (Some(Value::Null) | None, Some(Value::Array(items))) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| AuthError::InvalidClaim("scp".into()))
            })
            .collect(),
        (Some(Value::Null) | None, Some(Value::Null) | None) => Ok(Vec::new()),
        (Some(Value::Null) | None, Some(_)) => Err(AuthError::InvalidClaim("scp".into())),
        (Some(_), _) => Err(AuthError::InvalidClaim("scope".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn expected() -> Expected {
        Expected {
            issuer: Url::parse("https://idp.example.com").unwrap(),
            audience: "https://mcp.example.com/mcp".into(),
            subject_claim: "sub".into(),
            leeway_secs: 0,
        }
    }

    fn claims(v: Value) -> Claims {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn issuer_trailing_slash_is_the_only_leniency() {
        let configured = Url::parse("https://idp.example.com").unwrap();
        assert!(issuer_matches(&configured, "https://idp.example.com"));
        assert!(issuer_matches(&configured, "https://idp.example.com/"));
        assert!(!issuer_matches(&configured, "https://IDP.example.com"));
        assert!(!issuer_matches(&configured, "http://idp.example.com"));
        assert!(!issuer_matches(&configured, "https://idp.example.com//"));
        assert!(!issuer_matches(&configured, "https://idp.example.com/x"));
    }

    #[test]
    fn principal_spells_iss_as_configured_and_reads_azp_and_scp() {
        let c = claims(
            json!({"iss": "https://idp.example.com/", "sub": "u1", "azp": "app", "scp": ["a", "b"]}),
        );
        let p = principal(&c, &expected(), false).unwrap();
        // One spelling per issuer, the web sign-in's too: users are (issuer, subject).
        assert_eq!(p.issuer, "https://idp.example.com");
        assert_eq!((p.subject.as_str(), p.client_id.as_str()), ("u1", "app"));
        assert_eq!(p.scopes, vec!["a", "b"]);
    }

    #[test]
    fn client_id_wins_over_azp_and_scope_is_split() {
        let c = claims(
            json!({"iss": "https://idp.example.com", "sub": "u", "client_id": "c", "azp": "a", "scope": " x  y "}),
        );
        let p = principal(&c, &expected(), false).unwrap();
        assert_eq!(
            (p.client_id.as_str(), p.scopes.clone()),
            ("c", vec!["x".to_owned(), "y".to_owned()])
        );
    }

    #[test]
    fn missing_or_empty_identity_claims_are_rejected() {
        let no_client = claims(json!({"iss": "https://idp.example.com", "sub": "u"}));
        assert!(
            matches!(principal(&no_client, &expected(), false), Err(AuthError::MissingClaim(c)) if c == "client_id")
        );
        let empty_sub =
            claims(json!({"iss": "https://idp.example.com", "sub": "", "client_id": "c"}));
        assert!(
            matches!(principal(&empty_sub, &expected(), false), Err(AuthError::InvalidClaim(c)) if c == "sub")
        );
        let no_iss = claims(json!({"sub": "u", "client_id": "c"}));
        assert!(
            matches!(principal(&no_iss, &expected(), false), Err(AuthError::MissingClaim(c)) if c == "iss")
        );
        let p = principal(&no_iss, &expected(), true).unwrap();
        assert_eq!(p.issuer, "https://idp.example.com");
    }

    #[test]
    fn audience_must_contain_ours_exactly() {
        let ours = "https://mcp.example.com/mcp";
        assert!(audience_contains(&json!(ours), ours).unwrap());
        assert!(audience_contains(&json!(["other", ours]), ours).unwrap());
        assert!(!audience_contains(&json!("https://mcp.example.com/mcp/"), ours).unwrap());
        assert!(audience_contains(&json!(7), ours).is_err());
    }

    #[test]
    fn lifetime_checks_use_the_leeway() {
        let c = claims(json!({"exp": 1000, "nbf": 900}));
        assert_eq!(check_lifetime(&c, 950, 0, true).unwrap(), Some(1000));
        assert!(matches!(
            check_lifetime(&c, 1001, 0, true),
            Err(AuthError::Expired)
        ));
        assert!(check_lifetime(&c, 1001, 5, true).is_ok());
        assert!(matches!(
            check_lifetime(&c, 899, 0, true),
            Err(AuthError::NotYetValid)
        ));
        let none = claims(json!({}));
        assert!(matches!(
            check_lifetime(&none, 1, 0, true),
            Err(AuthError::MissingClaim(_))
        ));
        assert_eq!(check_lifetime(&none, 1, 0, false).unwrap(), None);
    }
}
