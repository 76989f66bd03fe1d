//! Test-only: a fake authorization server on 127.0.0.1:0 (OIDC and RFC 8414
//! metadata, a JWKS whose fetches are counted, RFC 7662 introspection), keys
//! generated with aws-lc-rs, and token minting with jsonwebtoken.

use std::{
    collections::HashMap,
    sync::{
        LazyLock, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
};

use actix_web::{HttpRequest, HttpResponse, web};
use aws_lc_rs::{
    encoding::{AsDer, Pkcs8V1Der},
    rand::SystemRandom,
    rsa::{KeyPair as RsaKeyPair, KeySize},
    signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair},
};
use base64::{Engine, engine::general_purpose::STANDARD};
use jsonwebtoken::{Algorithm, EncodingKey, Header, jwk::Jwk};
use provider_fakes::server::{self, Server};
use serde_json::{Map, Value, json};
use url::Url;

use super::{TokenVerifier, claims::Expected};
use crate::config::AuthSettings;

pub(crate) fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum KeyKind {
    Rsa,
    Ec,
    Ed,
}

impl KeyKind {
    pub(crate) fn kid(self) -> &'static str {
        match self {
            Self::Rsa => "rsa-1",
            Self::Ec => "ec-1",
            Self::Ed => "ed-1",
        }
    }

    fn alg(self) -> Algorithm {
        match self {
            Self::Rsa => Algorithm::RS256,
            Self::Ec => Algorithm::ES256,
            Self::Ed => Algorithm::EdDSA,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

struct TestKey {
    encoding: EncodingKey,
    jwk: Jwk,
}

/// The issuer's keys and a stranger's keys of the same kinds. Generated
/// once per test binary: RSA generation is slow in debug builds.
static KEYS: LazyLock<[[TestKey; 3]; 2]> = LazyLock::new(|| {
    let set = || {
        [
            generate(KeyKind::Rsa),
            generate(KeyKind::Ec),
            generate(KeyKind::Ed),
        ]
    };
    [set(), set()]
});

fn generate(kind: KeyKind) -> TestKey {
    let rng = SystemRandom::new();
    let encoding = match kind {
        KeyKind::Rsa => {
            let pair = RsaKeyPair::generate(KeySize::Rsa2048).unwrap();
            let der: Pkcs8V1Der = pair.as_der().unwrap();
            let b64 = STANDARD.encode(der.as_ref());
            let lines: Vec<&str> = b64
                .as_bytes()
                .chunks(64)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect();
            let pem = format!(
                "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
                lines.join("\n")
            );
            EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap()
        }
        KeyKind::Ec => {
            let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
            EncodingKey::from_ec_der(doc.as_ref())
        }
        KeyKind::Ed => {
            EncodingKey::from_ed_der(Ed25519KeyPair::generate_pkcs8v1(&rng).unwrap().as_ref())
        }
    };
    let mut jwk = Jwk::from_encoding_key(&encoding, kind.alg()).unwrap();
    if let KeyKind::Ed = kind {
        // Many issuers publish no `alg`; the key type must suffice.
        jwk.common.key_algorithm = None;
    }
    TestKey { encoding, jwk }
}

fn published(kind: KeyKind, stranger: bool, kid: &str) -> Value {
    let mut jwk = KEYS[usize::from(stranger)][kind.index()].jwk.clone();
    jwk.common.key_id = Some(kid.to_owned());
    serde_json::to_value(jwk).unwrap()
}

struct IdpState {
    base: String,
    jwks: Mutex<Vec<Value>>,
    jwks_fetches: AtomicUsize,
    metadata_fetches: AtomicUsize,
    introspection: Mutex<HashMap<String, Value>>,
    introspections: AtomicUsize,
    /// How long each introspection takes to answer, in milliseconds.
    introspection_delay_ms: AtomicUsize,
    /// Introspections being answered now, and the most there ever were.
    introspecting: AtomicUsize,
    most_introspecting: AtomicUsize,
}

pub(crate) struct Idp {
    state: web::Data<IdpState>,
    _server: Server,
}

impl Idp {
    pub(crate) async fn start() -> Idp {
        let bound = server::bind();
        let base = bound.base.clone();
        let jwks = [KeyKind::Rsa, KeyKind::Ec, KeyKind::Ed].map(|k| published(k, false, k.kid()));
        let state = web::Data::new(IdpState {
            base,
            jwks: Mutex::new(jwks.to_vec()),
            jwks_fetches: AtomicUsize::new(0),
            metadata_fetches: AtomicUsize::new(0),
            introspection: Mutex::new(HashMap::new()),
            introspections: AtomicUsize::new(0),
            introspection_delay_ms: AtomicUsize::new(0),
            introspecting: AtomicUsize::new(0),
            most_introspecting: AtomicUsize::new(0),
        });
        let data = state.clone();
        let server = bound.serve(move |cfg| {
            cfg.app_data(data.clone()).default_service(web::to(serve));
        });
        Idp {
            state,
            _server: server,
        }
    }

    pub(crate) fn issuer(&self) -> String {
        self.state.base.clone()
    }

    pub(crate) fn url(&self, path: &str) -> Url {
        Url::parse(&format!("{}{path}", self.state.base)).unwrap()
    }

    pub(crate) fn audience(&self) -> &'static str {
        "https://mcp.example.com/mcp"
    }

    pub(crate) fn expected(&self) -> Expected {
        Expected {
            issuer: self.url(""),
            audience: self.audience().into(),
            subject_claim: "sub".into(),
            leeway_secs: 30,
        }
    }

    /// A verifier configured for this issuer; `extra` is more `[auth]` TOML.
    pub(crate) fn verifier_with(&self, extra: &str) -> TokenVerifier {
        let settings: AuthSettings =
            toml::from_str(&format!("issuer = \"{}\"\n{extra}", self.state.base)).unwrap();
        let http = crate::providers::outbound_http_client().unwrap();
        TokenVerifier::new(&settings, self.audience().into(), http)
    }

    pub(crate) fn verifier(&self) -> TokenVerifier {
        self.verifier_with("")
    }

    pub(crate) fn introspection_toml(&self) -> String {
        format!(
            "[introspection]\nurl = \"{}\"\nclient_id = \"rs client\"\nclient_secret = \"s3cret:+\"\n",
            self.url("/introspect")
        )
    }

    /// Claims of a valid access token for this server.
    pub(crate) fn claims(&self) -> Map<String, Value> {
        let claims = json!({
            "iss": self.state.base, "sub": "alice", "aud": self.audience(), "client_id": "client-1",
            "scope": "mcp:tools", "iat": now(), "exp": now() + 300,
        });
        claims.as_object().unwrap().clone()
    }

    /// A token signed by the issuer's key of `kind`, with that key's kid.
    pub(crate) fn token(&self, kind: KeyKind, claims: &Map<String, Value>) -> String {
        self.token_with(kind, false, Some(kind.kid()), Some("at+jwt"), claims)
    }

    /// Any token: the issuer's or a `stranger`'s key, any kid and typ.
    pub(crate) fn token_with(
        &self,
        kind: KeyKind,
        stranger: bool,
        kid: Option<&str>,
        typ: Option<&str>,
        claims: &Map<String, Value>,
    ) -> String {
        let mut header = Header::new(kind.alg());
        header.kid = kid.map(str::to_owned);
        header.typ = typ.map(str::to_owned);
        let key = &KEYS[usize::from(stranger)][kind.index()].encoding;
        jsonwebtoken::encode(&header, claims, key).unwrap()
    }

    /// Adds a key to the served JWKS (a rotation, or a second key).
    pub(crate) fn publish(&self, kind: KeyKind, stranger: bool, kid: &str) {
        self.state
            .jwks
            .lock()
            .unwrap()
            .push(published(kind, stranger, kid));
    }

    pub(crate) fn jwks_fetches(&self) -> usize {
        self.state.jwks_fetches.load(Ordering::SeqCst)
    }

    pub(crate) fn metadata_fetches(&self) -> usize {
        self.state.metadata_fetches.load(Ordering::SeqCst)
    }

    pub(crate) fn set_introspection(&self, token: &str, answer: Value) {
        self.state
            .introspection
            .lock()
            .unwrap()
            .insert(token.to_owned(), answer);
    }

    pub(crate) fn introspections(&self) -> usize {
        self.state.introspections.load(Ordering::SeqCst)
    }

    /// Every introspection answers only after `delay`.
    pub(crate) fn slow_introspection(&self, delay: std::time::Duration) {
        let ms = usize::try_from(delay.as_millis()).unwrap();
        self.state
            .introspection_delay_ms
            .store(ms, Ordering::SeqCst);
    }

    /// The most introspections that were being answered at once.
    pub(crate) fn most_introspections_at_once(&self) -> usize {
        self.state.most_introspecting.load(Ordering::SeqCst)
    }
}

fn metadata(issuer: &str, base: &str) -> HttpResponse {
    HttpResponse::Ok().json(json!({
        "issuer": issuer,
        "jwks_uri": format!("{base}/jwks"),
        "introspection_endpoint": format!("{base}/introspect"),
    }))
}

async fn serve(req: HttpRequest, body: web::Bytes, state: web::Data<IdpState>) -> HttpResponse {
    let base = state.base.as_str();
    if req.path().contains("/.well-known/") {
        state.metadata_fetches.fetch_add(1, Ordering::SeqCst);
    }
    match (req.method().as_str(), req.path()) {
        ("GET", "/.well-known/openid-configuration") => metadata(base, base),
        ("GET", "/.well-known/oauth-authorization-server/oauth-only") => {
            metadata(&format!("{base}/oauth-only"), base)
        }
        ("GET", "/impostor/.well-known/openid-configuration") => {
            metadata("https://evil.example.com", base)
        }
        ("GET", "/plain-keys/.well-known/openid-configuration") => {
            metadata(&format!("{base}/plain-keys"), "http://idp.internal")
        }
        ("GET", "/jwks") => {
            state.jwks_fetches.fetch_add(1, Ordering::SeqCst);
            let keys = state.jwks.lock().unwrap().clone();
            HttpResponse::Ok().json(json!({ "keys": keys }))
        }
        ("GET", "/big") => {
            // Streamed without a length, so the cap applies while reading.
            let chunks =
                (0..300).map(|_| Ok::<_, actix_web::Error>(web::Bytes::from(vec![b' '; 1024])));
            HttpResponse::Ok()
                .content_type("application/json")
                .streaming(futures::stream::iter(chunks))
        }
        ("GET", "/redirect") => HttpResponse::Found()
            .insert_header(("Location", "/jwks"))
            .finish(),
        ("POST", "/introspect") => {
            // RFC 6749 §2.3.1: both parts form-encoded, then Basic.
            let expected = format!("Basic {}", STANDARD.encode("rs+client:s3cret%3A%2B"));
            let auth = req
                .headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok());
            if auth != Some(expected.as_str()) {
                return HttpResponse::Unauthorized().json(json!({"error": "invalid_client"}));
            }
            state.introspections.fetch_add(1, Ordering::SeqCst);
            let now = state.introspecting.fetch_add(1, Ordering::SeqCst) + 1;
            state.most_introspecting.fetch_max(now, Ordering::SeqCst);
            let delay = state.introspection_delay_ms.load(Ordering::SeqCst) as u64;
            tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
            state.introspecting.fetch_sub(1, Ordering::SeqCst);
            let token = url::form_urlencoded::parse(&body)
                .find(|(k, _)| k == "token")
                .map(|(_, v)| v.into_owned());
            let answers = state.introspection.lock().unwrap();
            let answer = token.and_then(|t| answers.get(&t).cloned());
            HttpResponse::Ok().json(answer.unwrap_or_else(|| json!({"active": false})))
        }
        _ => HttpResponse::NotFound().finish(),
    }
}
