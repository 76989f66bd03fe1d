//! The demo provider's memory: authorization codes, access tokens and
//! refresh tokens, each kept only as the SHA-256 of its value.
//!
//! Every token belongs to a *family*: the one authorization it came from.
//! A family dies as a whole when its code is replayed (RFC 6749 §4.1.2), when
//! a rotated refresh token is presented again (RFC 9700 §4.14.2: someone
//! holds a stolen copy) and when its refresh token is revoked (RFC 7009
//! §2.1). Whole operations run under the caller's one lock, so a concurrent
//! replay cannot slip between a check and the issuance it guards.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use sha2::{Digest as _, Sha256};

use super::super::{
    grants::{pkce_s256_matches, random_token},
    params::{UserName, is_code_verifier},
};

pub(super) const CODE_TTL: Duration = Duration::from_secs(60);
pub(super) const REFRESH_TTL: Duration = Duration::from_secs(24 * 3600);
/// How long a used code is remembered, to recognise a replay.
const USED_CODE_MEMORY: Duration = Duration::from_secs(600);

type Digest = [u8; 32];
type Family = u64;

/// What the person approved on the authorize page.
#[derive(Debug, Clone)]
pub(super) struct CodeGrant {
    pub redirect_uri: String,
    pub code_challenge: String,
    pub user: UserName,
    pub scope: String,
}

/// A token answer's contents.
#[derive(Debug)]
pub(super) struct Issued {
    pub access_token: String,
    pub refresh_token: String,
    pub expires_in: u64,
    pub scope: String,
}

/// Why a grant was refused: an RFC 6749 §5.2 error code and its reason.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Refused {
    pub error: &'static str,
    pub description: &'static str,
}

const fn refused(error: &'static str, description: &'static str) -> Refused {
    Refused { error, description }
}

struct Token {
    family: Family,
    user: UserName,
    scope: String,
    expires: Instant,
}

pub(super) struct Store {
    access_ttl: Duration,
    codes: HashMap<Digest, (CodeGrant, Instant)>,
    /// Presented codes and the family issued from them, until forgotten.
    used_codes: HashMap<Digest, (Family, Instant)>,
    access: HashMap<Digest, Token>,
    /// `true` once rotated: kept so that a second presentation is noticed.
    refresh: HashMap<Digest, (Token, bool)>,
    next_family: Family,
}

impl Store {
    pub(super) fn new(access_ttl: Duration) -> Self {
        Self {
            access_ttl,
            codes: HashMap::new(),
            used_codes: HashMap::new(),
            access: HashMap::new(),
            refresh: HashMap::new(),
            next_family: 0,
        }
    }

    pub(super) fn access_ttl(&self) -> Duration {
        self.access_ttl
    }

    pub(super) fn set_access_ttl(&mut self, ttl: Duration) {
        self.access_ttl = ttl;
    }

    /// Stores `grant` for [`CODE_TTL`] and returns the code.
    pub(super) fn issue_code(&mut self, grant: CodeGrant, now: Instant) -> String {
        self.sweep(now);
        let code = random_token();
        self.codes.insert(digest(&code), (grant, now + CODE_TTL));
        code
    }

    /// The `authorization_code` grant. The code is spent on its first
    /// presentation whatever the outcome; a second one revokes what the
    /// first obtained.
    pub(super) fn exchange_code(
        &mut self,
        code: &str,
        redirect_uri: &str,
        verifier: &str,
        now: Instant,
    ) -> Result<Issued, Refused> {
        let key = digest(code);
        let Some((grant, expires)) = self.codes.remove(&key) else {
            if let Some((family, _)) = self.used_codes.get(&key).copied() {
                self.revoke_family(family);
                tracing::warn!("demo provider: a code was replayed; its tokens are revoked");
            }
            return Err(refused(
                "invalid_grant",
                "the code is unknown, expired or already used",
            ));
        };
        let family = self.next_family;
        self.next_family += 1;
        self.used_codes
            .insert(key, (family, now + USED_CODE_MEMORY));
        if now >= expires {
            return Err(refused("invalid_grant", "the code has expired"));
        }
        if grant.redirect_uri != redirect_uri {
            return Err(refused(
                "invalid_grant",
                "redirect_uri differs from the authorization request",
            ));
        }
        if !is_code_verifier(verifier) || !pkce_s256_matches(verifier, &grant.code_challenge) {
            return Err(refused(
                "invalid_grant",
                "code_verifier does not match the code_challenge",
            ));
        }
        Ok(self.issue(family, grant.user, grant.scope, now))
    }

    /// The `refresh_token` grant, rotating: the presented token is spent.
    /// `scope`, when given, may narrow the grant, never widen it.
    pub(super) fn refresh(
        &mut self,
        token: &str,
        scope: Option<&str>,
        now: Instant,
    ) -> Result<Issued, Refused> {
        let unknown = refused(
            "invalid_grant",
            "the refresh token is unknown, expired or revoked",
        );
        let Some((entry, rotated)) = self.refresh.get_mut(&digest(token)) else {
            return Err(unknown);
        };
        if now >= entry.expires {
            return Err(unknown);
        }
        if *rotated {
            let family = entry.family;
            self.revoke_family(family);
            tracing::warn!("demo provider: a rotated refresh token was reused; revoking its grant");
            return Err(refused(
                "invalid_grant",
                "the refresh token was already used; the grant is revoked",
            ));
        }
        let scope = match scope.filter(|s| !s.trim().is_empty()) {
            None => entry.scope.clone(),
            Some(asked) => {
                let granted: Vec<&str> = entry.scope.split_whitespace().collect();
                if !asked.split_whitespace().all(|s| granted.contains(&s)) {
                    return Err(refused(
                        "invalid_scope",
                        "a refresh cannot widen the granted scope",
                    ));
                }
                asked.split_whitespace().collect::<Vec<_>>().join(" ")
            }
        };
        *rotated = true;
        let (family, user) = (entry.family, entry.user.clone());
        Ok(self.issue(family, user, scope, now))
    }

    /// The user and scope behind a live access token.
    pub(super) fn access(&self, token: &str, now: Instant) -> Option<(UserName, String)> {
        let entry = self.access.get(&digest(token))?;
        (now < entry.expires).then(|| (entry.user.clone(), entry.scope.clone()))
    }

    /// RFC 7009: a refresh token takes its whole grant with it; an access
    /// token only itself. Unknown tokens are fine: they are as good as
    /// revoked.
    pub(super) fn revoke(&mut self, token: &str) {
        let key = digest(token);
        if let Some(family) = self.refresh.get(&key).map(|(t, _)| t.family) {
            self.revoke_family(family);
        } else {
            self.access.remove(&key);
        }
    }

    fn issue(&mut self, family: Family, user: UserName, scope: String, now: Instant) -> Issued {
        self.sweep(now);
        let access_token = format!("demo_at_{}", random_token());
        let refresh_token = format!("demo_rt_{}", random_token());
        let token = |expires| Token {
            family,
            user: user.clone(),
            scope: scope.clone(),
            expires,
        };
        self.access
            .insert(digest(&access_token), token(now + self.access_ttl));
        self.refresh
            .insert(digest(&refresh_token), (token(now + REFRESH_TTL), false));
        Issued {
            access_token,
            refresh_token,
            expires_in: self.access_ttl.as_secs(),
            scope,
        }
    }

    fn revoke_family(&mut self, family: Family) {
        self.access.retain(|_, t| t.family != family);
        self.refresh.retain(|_, (t, _)| t.family != family);
    }

    fn sweep(&mut self, now: Instant) {
        self.codes.retain(|_, (_, expires)| now < *expires);
        self.used_codes.retain(|_, (_, forget)| now < *forget);
        self.access.retain(|_, t| now < t.expires);
        self.refresh.retain(|_, (t, _)| now < t.expires);
    }
}

fn digest(value: &str) -> Digest {
    Sha256::digest(value.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 7636 Appendix B.
    const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
    const REDIRECT: &str = "http://127.0.0.1:9/oauth/callback/demo";

    fn approved(store: &mut Store, now: Instant) -> String {
        let grant = CodeGrant {
            redirect_uri: REDIRECT.into(),
            code_challenge: CHALLENGE.into(),
            user: UserName::parse("alice").unwrap(),
            scope: "profile".into(),
        };
        store.issue_code(grant, now)
    }

    #[test]
    fn only_digests_are_kept() {
        let mut store = Store::new(Duration::from_secs(300));
        let now = Instant::now();
        let code = approved(&mut store, now);
        let issued = store.exchange_code(&code, REDIRECT, VERIFIER, now).unwrap();
        assert!(store.codes.is_empty());
        assert!(store.used_codes.contains_key(&digest(&code)));
        assert!(store.access.contains_key(&digest(&issued.access_token)));
        assert!(store.refresh.contains_key(&digest(&issued.refresh_token)));
    }

    #[test]
    fn codes_expire_after_sixty_seconds() {
        let mut store = Store::new(Duration::from_secs(300));
        let now = Instant::now();
        let code = approved(&mut store, now);
        let late = store.exchange_code(&code, REDIRECT, VERIFIER, now + CODE_TTL);
        assert_eq!(late.unwrap_err().error, "invalid_grant");
        let code = approved(&mut store, now);
        let in_time = now + CODE_TTL - Duration::from_secs(1);
        assert!(
            store
                .exchange_code(&code, REDIRECT, VERIFIER, in_time)
                .is_ok()
        );
    }

    #[test]
    fn a_refresh_can_narrow_but_not_widen_the_scope() {
        let mut store = Store::new(Duration::from_secs(300));
        let now = Instant::now();
        let code = approved(&mut store, now);
        let issued = store.exchange_code(&code, REDIRECT, VERIFIER, now).unwrap();
        let wider = store.refresh(&issued.refresh_token, Some("profile admin"), now);
        assert_eq!(wider.unwrap_err().error, "invalid_scope");
        let same = store.refresh(&issued.refresh_token, Some("profile"), now);
        assert_eq!(same.unwrap().scope, "profile");
    }
}
