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
    same_issuer(configured.as_str(), iss)
}

/// [`issuer_matches`] for an issuer given as text (a provider entry's).
pub(crate) fn same_issuer(expected: &str, iss: &str) -> bool {
    let trim = |s: &str| s.strip_suffix('/').unwrap_or(s).to_owned();
    trim(expected) == trim(iss)
}

/// `aud` as a string or an array of strings; it must contain `audience`
/// (RFC 8707 resource indicators are compared as strings, except that the
/// scheme and host may differ in case: the authorization spec's "SHOULD
/// accept uppercase scheme and host components"; nothing else is
/// normalised — not a trailing `/`, not a default port).
pub(crate) fn audience_contains(aud: &Value, audience: &str) -> Result<bool, AuthError> {
    match aud {
        Value::String(s) => Ok(same_resource(s, audience)),
        Value::Array(items) => {
            let mut found = false;
            for item in items {
                let s = item
                    .as_str()
                    .ok_or_else(|| AuthError::InvalidClaim("aud".into()))?;
                found |= same_resource(s, audience);
            }
            Ok(found)
        }
        _ => Err(AuthError::InvalidClaim("aud".into())),
    }
}

/// Whether two resource URIs name the same resource: equal, or equal but
/// for the case of the scheme and the authority (host and port).
fn same_resource(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    // `scheme://authority` and the rest (path, query), which stays exact.
    let split = |s: &str| -> Option<(usize, usize)> {
        let scheme_end = s.find("://")?;
        let authority_end = s[scheme_end + 3..]
            .find(['/', '?', '#'])
            .map_or(s.len(), |i| scheme_end + 3 + i);
        Some((scheme_end, authority_end))
    };
    match (split(a), split(b)) {
        (Some((_, end_a)), Some((_, end_b))) => {
            a[..end_a].eq_ignore_ascii_case(&b[..end_b]) && a[end_a..] == b[end_b..]
        }
        _ => false,
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
    // RFC 9068 names `client_id`; OpenID-style issuers send `azp`, Okta
    // `cid` and Microsoft Entra's v1.0 tokens `appid` instead.
    let mut client_id = None;
    for name in CLIENT_ID_CLAIMS {
        client_id = non_empty_string(claims, name)?;
        if client_id.is_some() {
            break;
        }
    }
    let client_id = client_id.ok_or_else(|| AuthError::MissingClaim("client_id".into()))?;
    Ok(Principal {
        issuer,
        subject,
        client_id,
        scopes: scopes(claims)?,
    })
}

/// Where an access token names its client, in order of preference.
const CLIENT_ID_CLAIMS: [&str; 4] = ["client_id", "azp", "cid", "appid"];

fn non_empty_string(claims: &Claims, name: &str) -> Result<Option<String>, AuthError> {
    match claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
        Some(_) => Err(AuthError::InvalidClaim(name.into())),
    }
}

/// `scope` (RFC 9068, space-separated; some issuers, Spring Authorization
/// Server among them, send an array) or `scp` (Entra, Okta: an array, or
/// sometimes a space-separated string).
fn scopes(claims: &Claims) -> Result<Vec<String>, AuthError> {
    let read = |name: &str, value: &Value| -> Result<Vec<String>, AuthError> {
        match value {
            Value::String(s) => Ok(s.split_ascii_whitespace().map(str::to_owned).collect()),
            Value::Array(items) => items
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| AuthError::InvalidClaim(name.into()))
                })
                .collect(),
            _ => Err(AuthError::InvalidClaim(name.into())),
        }
    };
    match (claims.get("scope"), claims.get("scp")) {
        (Some(scope), _) if !scope.is_null() => read("scope", scope),
        (_, Some(scp)) if !scp.is_null() => read("scp", scp),
        _ => Ok(Vec::new()),
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
    fn audience_scheme_and_host_may_differ_in_case_and_nothing_else() {
        let ours = "https://mcp.example.com:8443/mcp";
        for same in [
            "HTTPS://MCP.Example.com:8443/mcp",
            "https://mcp.EXAMPLE.com:8443/mcp",
        ] {
            assert!(audience_contains(&json!(same), ours).unwrap(), "{same}");
            assert!(
                audience_contains(&json!(["x", same]), ours).unwrap(),
                "{same}"
            );
        }
        for other in [
            "https://mcp.example.com:8443/MCP",
            "https://mcp.example.com/mcp",
            "http://mcp.example.com:8443/mcp",
            "https://mcp.example.com:8443/mcp/",
            "https://mcp.example.com:8443",
            "mcp.example.com:8443/mcp",
            "",
        ] {
            assert!(!audience_contains(&json!(other), ours).unwrap(), "{other}");
        }
        // A bare host: the case of the host only, no slash added.
        let bare = "https://mcp.example.com";
        assert!(audience_contains(&json!("https://MCP.example.com"), bare).unwrap());
        assert!(!audience_contains(&json!("https://MCP.example.com/"), bare).unwrap());
    }

    #[test]
    fn the_client_is_read_from_cid_or_appid_when_nothing_earlier_names_it() {
        let base = json!({"iss": "https://idp.example.com", "sub": "u"});
        for (extra, want) in [
            (json!({"cid": "okta-app"}), "okta-app"),
            (json!({"appid": "entra-app"}), "entra-app"),
            (json!({"azp": "a", "cid": "c", "appid": "e"}), "a"),
            (json!({"client_id": "x", "cid": "c"}), "x"),
        ] {
            let mut c = claims(base.clone());
            c.extend(claims(extra.clone()));
            let p = principal(&c, &expected(), false).unwrap();
            assert_eq!(p.client_id, want, "{extra}");
        }
        let mut c = claims(base);
        c.insert("cid".into(), json!(7));
        assert!(
            matches!(principal(&c, &expected(), false), Err(AuthError::InvalidClaim(n)) if n == "cid")
        );
    }

    #[test]
    fn scope_may_be_an_array_and_wins_over_scp() {
        let read = |v: Value| scopes(&claims(v));
        assert_eq!(read(json!({"scope": ["a", "b"]})).unwrap(), vec!["a", "b"]);
        assert_eq!(
            read(json!({"scope": "a b", "scp": ["c"]})).unwrap(),
            vec!["a", "b"]
        );
        assert_eq!(
            read(json!({"scope": null, "scp": "c d"})).unwrap(),
            vec!["c", "d"]
        );
        assert!(read(json!({})).unwrap().is_empty());
        assert!(
            matches!(read(json!({"scope": [1]})), Err(AuthError::InvalidClaim(n)) if n == "scope")
        );
        assert!(
            matches!(read(json!({"scope": 5})), Err(AuthError::InvalidClaim(n)) if n == "scope")
        );
        assert!(matches!(read(json!({"scp": {}})), Err(AuthError::InvalidClaim(n)) if n == "scp"));
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
