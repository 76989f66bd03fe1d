//! What a fake provider remembers: the last authorization request, the
//! codes it issued (single-use, 10 minutes), the grants and tokens they led
//! to, the account each grant belongs to, and how often each endpoint was
//! called. Values are kept in clear: this is a test double, and tests may
//! want to look for them where they must not appear.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{
        Mutex, MutexGuard,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use sha2::{Digest, Sha256};

/// GitHub, Google and Slack all let a code live about ten minutes.
const CODE_TTL: Duration = Duration::from_secs(600);

/// The account a grant is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// GitHub's numeric id, Google's `sub`, Slack's user id.
    pub id: String,
    /// GitHub's login, Google's email, Slack's user name.
    pub login: String,
}

/// How often each endpoint was called (every call, refused or not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Calls {
    pub authorize: usize,
    /// Every request to the token endpoint, whatever its grant type.
    pub token: usize,
    /// Token requests with `grant_type=refresh_token`.
    pub refresh: usize,
    pub userinfo: usize,
    pub api: usize,
    pub revoke: usize,
    /// GitHub's check of an app token (`POST /applications/{client_id}/token`),
    /// which ends nothing.
    pub check: usize,
}

#[derive(Default)]
pub(super) struct Counters {
    pub authorize: AtomicUsize,
    pub token: AtomicUsize,
    pub refresh: AtomicUsize,
    pub userinfo: AtomicUsize,
    pub api: AtomicUsize,
    pub revoke: AtomicUsize,
    pub check: AtomicUsize,
}

impl Counters {
    pub(super) fn bump(counter: &AtomicUsize) {
        counter.fetch_add(1, Ordering::SeqCst);
    }

    pub(super) fn snapshot(&self) -> Calls {
        let get = |c: &AtomicUsize| c.load(Ordering::SeqCst);
        Calls {
            authorize: get(&self.authorize),
            token: get(&self.token),
            refresh: get(&self.refresh),
            userinfo: get(&self.userinfo),
            api: get(&self.api),
            revoke: get(&self.revoke),
            check: get(&self.check),
        }
    }
}

/// An issued code: the authorize request it answered and who approved it.
#[derive(Debug, Clone)]
pub(super) struct Code {
    pub request: BTreeMap<String, String>,
    pub account: Account,
    expires: Instant,
}

impl Code {
    pub(super) fn param(&self, name: &str) -> Option<&str> {
        self.request.get(name).map(String::as_str)
    }
}

/// What an access token stands for.
#[derive(Debug, Clone)]
pub(super) struct Access {
    pub grant: u64,
    pub account: Account,
    pub scope: String,
    expires: Option<Instant>,
}

struct Refresh {
    grant: u64,
    account: Account,
    scope: String,
}

pub(super) struct Memory {
    pub deny_next: bool,
    /// GitHub answers form-encoded even when JSON was asked for (as some
    /// GitHub Enterprise Server versions do).
    pub form_answers: bool,
    /// Every request is answered with this status, as by a provider that
    /// is down behind its load balancer.
    pub fail_with: Option<u16>,
    /// The next this many requests are answered with this status, as by a
    /// provider failing for a moment.
    pub fail_next: Option<(usize, u16)>,
    /// Every request waits, unanswered, while this is set: a provider
    /// whose answers never come (a hung load balancer).
    pub stalled: bool,
    /// Requests held by `stalled` right now.
    pub held: usize,
    /// Requests to these paths are answered with their status: one of
    /// the provider's services down while the others answer.
    pub fail_at: BTreeMap<String, u16>,
    pub account: Account,
    /// Lifetime of new access tokens; `None` for tokens that never expire.
    pub access_ttl: Option<Duration>,
    pub last_authorize: Option<BTreeMap<String, String>>,
    /// Salesforce: the org host its token answers name (`None`: the
    /// fake's own `localhost` address).
    pub instance_url: Option<String>,
    /// API calls as `(Host header, path)`, oldest first.
    pub api_seen: Vec<(String, String)>,
    /// Paths of token endpoint requests, oldest first (Entra's carry the tenant).
    pub token_paths: Vec<String>,
    /// Refresh tokens in the order they were issued, live or not.
    pub refresh_issued: Vec<String>,
    /// Strava, Google: the scopes the person leaves ticked on the consent
    /// page (`None`: all those asked for).
    pub ticked: Option<String>,
    /// Slack: the app has PKCE turned on in its settings.
    pub pkce_on: bool,
    codes: HashMap<String, Code>,
    access: HashMap<String, Access>,
    refresh: HashMap<String, Refresh>,
    issued: Vec<String>,
    next_grant: u64,
}

/// A fake's shared state.
pub(super) struct Shared {
    pub client_id: String,
    pub client_secret: String,
    pub calls: Counters,
    /// Every request, oldest first.
    pub seen: Mutex<Vec<crate::recording::Seen>>,
    memory: Mutex<Memory>,
}

impl Shared {
    pub(super) fn new(client_id: &str, account: Account, access_ttl: Option<Duration>) -> Self {
        Self {
            client_id: client_id.to_owned(),
            client_secret: random(""),
            calls: Counters::default(),
            seen: Mutex::new(Vec::new()),
            memory: Mutex::new(Memory {
                deny_next: false,
                form_answers: false,
                fail_with: None,
                fail_next: None,
                stalled: false,
                held: 0,
                fail_at: BTreeMap::new(),
                account,
                access_ttl,
                last_authorize: None,
                instance_url: None,
                api_seen: Vec::new(),
                token_paths: Vec::new(),
                refresh_issued: Vec::new(),
                ticked: None,
                pkce_on: false,
                codes: HashMap::new(),
                access: HashMap::new(),
                refresh: HashMap::new(),
                issued: Vec::new(),
                next_grant: 0,
            }),
        }
    }

    pub(super) fn memory(&self) -> MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Memory {
    /// Records an authorize request and issues `code` for it, or returns
    /// `None` when the test asked for the next one to be denied.
    pub(super) fn authorize(
        &mut self,
        request: BTreeMap<String, String>,
        code: String,
    ) -> Option<String> {
        self.last_authorize = Some(request.clone());
        if std::mem::take(&mut self.deny_next) {
            return None;
        }
        let code = self.remember(code);
        let account = self.account.clone();
        let expires = Instant::now() + CODE_TTL;
        self.codes.insert(
            code.clone(),
            Code {
                request,
                account,
                expires,
            },
        );
        Some(code)
    }

    /// Removes the code: it works once, whatever happens next.
    pub(super) fn take_code(&mut self, code: &str) -> Option<Code> {
        let found = self.codes.remove(code)?;
        (Instant::now() < found.expires).then_some(found)
    }

    pub(super) fn new_grant(&mut self) -> u64 {
        self.next_grant += 1;
        self.next_grant
    }

    pub(super) fn issue_access(
        &mut self,
        grant: u64,
        account: &Account,
        scope: &str,
        prefix: &str,
    ) -> String {
        let token = self.remember(random(prefix));
        let expires = self.access_ttl.map(|ttl| Instant::now() + ttl);
        let access = Access {
            grant,
            account: account.clone(),
            scope: scope.to_owned(),
            expires,
        };
        self.access.insert(token.clone(), access);
        token
    }

    pub(super) fn issue_refresh(
        &mut self,
        grant: u64,
        account: &Account,
        scope: &str,
        prefix: &str,
    ) -> String {
        let token = self.remember(random(prefix));
        self.refresh_issued.push(token.clone());
        let refresh = Refresh {
            grant,
            account: account.clone(),
            scope: scope.to_owned(),
        };
        self.refresh.insert(token.clone(), refresh);
        token
    }

    /// A live access token's grant.
    pub(super) fn access(&self, token: &str) -> Option<Access> {
        let access = self.access.get(token)?;
        let live = access.expires.is_none_or(|at| Instant::now() < at);
        live.then(|| access.clone())
    }

    /// A refresh token's grant, account and scope (refresh tokens here do
    /// not rotate: Google keeps the one it issued).
    pub(super) fn refresh(&self, token: &str) -> Option<(u64, Account, String)> {
        let r = self.refresh.get(token)?;
        Some((r.grant, r.account.clone(), r.scope.clone()))
    }

    /// The `refresh_token` parameter of a token request, with its grant,
    /// account and scope; `None` when the fake does not know it.
    pub(super) fn refresh_param(
        &self,
        p: &BTreeMap<String, String>,
    ) -> Option<(String, u64, Account, String)> {
        let given = p.get("refresh_token")?;
        let (grant, account, scope) = self.refresh(given)?;
        Some((given.clone(), grant, account, scope))
    }

    /// A refresh token's grant, account and scope, retiring the token: it
    /// works once (rotating refresh tokens: Atlassian's, Notion's, GitHub
    /// Apps', Slack's with rotation on).
    pub(super) fn take_refresh(&mut self, token: &str) -> Option<(u64, Account, String)> {
        let r = self.refresh.remove(token)?;
        Some((r.grant, r.account, r.scope))
    }

    /// Ends the grant `token` belongs to; `false` when the token is unknown.
    pub(super) fn revoke_grant_of(&mut self, token: &str) -> bool {
        let grant = match (self.access.get(token), self.refresh.get(token)) {
            (Some(a), _) => a.grant,
            (None, Some(r)) => r.grant,
            (None, None) => return false,
        };
        self.access.retain(|_, a| a.grant != grant);
        self.refresh.retain(|_, r| r.grant != grant);
        true
    }

    /// Ends the access token alone; `false` when it is unknown or already
    /// dead.
    pub(super) fn revoke_access(&mut self, token: &str) -> bool {
        self.access(token).is_some() && self.access.remove(token).is_some()
    }

    /// Ends the refresh token and the access tokens of its grant; `false`
    /// when it is unknown.
    pub(super) fn revoke_refresh(&mut self, token: &str) -> bool {
        let Some(refresh) = self.refresh.remove(token) else {
            return false;
        };
        self.access.retain(|_, a| a.grant != refresh.grant);
        true
    }

    /// Ends every token of the account the live access token `token`
    /// belongs to, whatever grant it came from (the fake is one client);
    /// `false` when the token is unknown or dead.
    pub(super) fn revoke_account_of(&mut self, token: &str) -> bool {
        let Some(account) = self.access(token).map(|a| a.account) else {
            return false;
        };
        self.access.retain(|_, a| a.account != account);
        self.refresh.retain(|_, r| r.account != account);
        true
    }

    /// The live access token `token` and every token of its grant.
    pub(super) fn grant_tokens(&self, token: &str) -> Option<Vec<String>> {
        let grant = self.access(token)?.grant;
        let access = self.access.iter().filter(|(_, a)| a.grant == grant);
        let refresh = self.refresh.iter().filter(|(_, r)| r.grant == grant);
        Some(
            access
                .map(|(t, _)| t.clone())
                .chain(refresh.map(|(t, _)| t.clone()))
                .collect(),
        )
    }

    pub(super) fn expire_access_tokens(&mut self) {
        let now = Instant::now();
        for access in self.access.values_mut() {
            access.expires = Some(now);
        }
    }

    pub(super) fn issued(&self) -> Vec<String> {
        self.issued.clone()
    }

    fn remember(&mut self, value: String) -> String {
        self.issued.push(value.clone());
        value
    }
}

/// A fresh random value with a provider-style prefix.
pub(super) fn random(prefix: &str) -> String {
    let a = uuid::Uuid::new_v4().simple().to_string();
    let b = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}{a}{b}")
}

/// RFC 7636: `S256` compares BASE64URL(SHA256(verifier)); `plain` the
/// verifier itself.
pub(super) fn pkce_matches(method: &str, challenge: &str, verifier: &str) -> bool {
    match method {
        "S256" => URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes())) == challenge,
        "plain" => verifier == challenge,
        _ => false,
    }
}
