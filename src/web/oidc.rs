//! The OpenID Connect client behind the web sign-in, on the `openidconnect`
//! crate: discovery of `auth.issuer` (the same authorization server that
//! issues MCP tokens, so both sides name people the same way), the
//! authorization URL with PKCE S256 and a nonce, the code exchange, and ID
//! token verification (signature against the discovered JWKS — EdDSA
//! included — `iss`, `aud` = our client id, `exp`, `nonce`).
//!
//! Starting and finishing a sign-in both reuse what was discovered in the
//! last [`START_METADATA_TTL`] (one discovery at a time): anyone can open
//! `/login`, and anyone holding a sign-in's cookie can replay its callback
//! with made-up codes; neither may turn each request into more requests to
//! the identity provider. An ID token signed with a key the kept JWKS lacks
//! (a rotation) discovers again, at most once per [`REDISCOVERY_INTERVAL`].

use anyhow::{Context, anyhow};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use futures::StreamExt;
use openidconnect::{
    AdditionalProviderMetadata, AuthType, AuthorizationCode, ClaimsVerificationError, ClientId,
    ClientSecret, CsrfToken, DiscoveryError, EndpointMaybeSet, EndpointNotSet, EndpointSet,
    IssuerUrl, Nonce, PkceCodeChallenge, PkceCodeVerifier, ProviderMetadata, RedirectUrl, Scope,
    SignatureVerificationError, TokenResponse,
    core::{
        CoreAuthDisplay, CoreAuthPrompt, CoreAuthenticationFlow, CoreClaimName, CoreClaimType,
        CoreClient, CoreClientAuthMethod, CoreGrantType, CoreJsonWebKey,
        CoreJweContentEncryptionAlgorithm, CoreJweKeyManagementAlgorithm, CoreResponseMode,
        CoreResponseType, CoreSubjectIdentifierType,
    },
};
use secrecy::ExposeSecret;
use url::Url;

use super::pages::WebError;
use crate::state::AppState;

/// Largest discovery, JWKS or token response read.
const MAX_RESPONSE_BYTES: usize = 512 * 1024;

/// How long metadata discovered for starting a sign-in is reused.
pub const START_METADATA_TTL: std::time::Duration = std::time::Duration::from_secs(300);

/// The least time between two discoveries made for an ID token signed
/// with an unknown key.
pub const REDISCOVERY_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);

/// How long `/readyz` waits for a first discovery.
const READY_DISCOVERY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether the identity provider's metadata was fetched once; if not,
/// tries now (briefly). Until then the instance can verify no token and
/// sign nobody in, so it must not be sent traffic.
///
/// The discovery runs on a task of its own (on this worker's thread: the
/// OIDC client's futures stay on theirs), one at a time: a probe that stops
/// waiting leaves it running, so an identity provider slower to answer than
/// the probe's wait still gets the instance ready (a cancelled discovery
/// would start over at every probe and never finish), and the probes that
/// come meanwhile wait for that one instead of starting more.
pub async fn metadata_reached(state: &AppState) -> bool {
    let metadata = &state.sign_in_metadata;
    if metadata.was_reached() {
        return true;
    }
    let ended = metadata.probe_ended();
    tokio::pin!(ended);
    // From here on, the end of a discovery is not missed.
    ended.as_mut().enable();
    if metadata.start_probe() {
        let probe = ProbeUnderWay(state.clone());
        actix_web::rt::spawn(async move {
            let state = &probe.0;
            let found = state
                .sign_in_metadata
                .get_or_discover(START_METADATA_TTL, discover(state))
                .await;
            if let Err(e) = found {
                tracing::warn!(error = %e, "readiness: identity provider metadata not fetched");
            }
        });
    }
    if tokio::time::timeout(READY_DISCOVERY_WAIT, ended)
        .await
        .is_err()
    {
        tracing::warn!("readiness: identity provider metadata not fetched yet; still asking");
    }
    metadata.was_reached()
}

/// The readiness discovery's claim, given back however its task ends.
struct ProbeUnderWay(AppState);

impl Drop for ProbeUnderWay {
    fn drop(&mut self) {
        self.0.sign_in_metadata.end_probe();
    }
}

/// The identity provider's discovery document: the standard fields, and
/// whether it names itself in authorization responses (RFC 9207).
pub type SignInProviderMetadata = ProviderMetadata<
    IssuerInResponses,
    CoreAuthDisplay,
    CoreClientAuthMethod,
    CoreClaimName,
    CoreClaimType,
    CoreGrantType,
    CoreJweContentEncryptionAlgorithm,
    CoreJweKeyManagementAlgorithm,
    CoreJsonWebKey,
    CoreResponseMode,
    CoreResponseType,
    CoreSubjectIdentifierType,
>;

/// RFC 9207's `authorization_response_iss_parameter_supported`. Kept as
/// any JSON value: a malformed optional field must not make discovery
/// fail (and with it every sign-in); only `true` counts.
#[derive(Clone, Debug, Default, serde::Deserialize, serde::Serialize)]
pub struct IssuerInResponses {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    authorization_response_iss_parameter_supported: Option<serde_json::Value>,
}

impl AdditionalProviderMetadata for IssuerInResponses {}

impl IssuerInResponses {
    /// Whether the identity provider says it puts `iss` in every
    /// authorization response.
    pub fn promised(&self) -> bool {
        self.authorization_response_iss_parameter_supported == Some(serde_json::Value::Bool(true))
    }
}

type Client = CoreClient<
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// Who signed in.
#[derive(Debug, Clone)]
pub struct Identity {
    pub issuer: String,
    pub subject: String,
    pub display_name: String,
}

/// Where the identity provider sends the browser back.
pub fn redirect_uri(state: &AppState) -> String {
    format!("{}/auth/callback", state.settings.base_url())
}

/// The identity provider's authorization URL for a new sign-in.
pub async fn authorize_url(
    state: &AppState,
    flow_state: &str,
    nonce: &str,
    pkce_verifier: &str,
    choose_account: bool,
) -> Result<Url, WebError> {
    let metadata = state
        .sign_in_metadata
        .get_or_discover(START_METADATA_TTL, discover(state))
        .await?;
    let client = client(state, metadata)?;
    let challenge =
        PkceCodeChallenge::from_code_verifier_sha256(&PkceCodeVerifier::new(pkce_verifier.into()));
    let (flow_state, nonce) = (flow_state.to_owned(), nonce.to_owned());
    let mut request = client
        .authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            move || CsrfToken::new(flow_state),
            move || Nonce::new(nonce),
        )
        .add_scope(Scope::new("profile".into()))
        .set_pkce_challenge(challenge);
    if choose_account {
        // Switching accounts: make the provider ask again instead of
        // silently reusing the session that signed the wrong person in.
        request = request.add_prompt(CoreAuthPrompt::Login);
    }
    Ok(request.url().0)
}

/// Exchanges the code and verifies the ID token.
pub async fn finish(
    state: &AppState,
    code: &str,
    pkce_verifier: String,
    nonce: &str,
) -> Result<Identity, WebError> {
    let metadata = state
        .sign_in_metadata
        .get_or_discover(START_METADATA_TTL, discover(state))
        .await?;
    let client = client(state, metadata)?;
    let http = http_client(state.http.clone());
    let tokens = client
        .exchange_code(AuthorizationCode::new(code.to_owned()))
        .map_err(|e| WebError::Internal(anyhow!("identity provider has no token endpoint: {e}")))?
        .set_pkce_verifier(PkceCodeVerifier::new(pkce_verifier))
        .request_async(&http)
        .await
        .map_err(|e| WebError::Upstream(anyhow!("sign-in code exchange failed: {e}")))?;
    let id_token = tokens
        .id_token()
        .ok_or_else(|| WebError::Upstream(anyhow!("token response has no id_token")))?;
    let nonce = Nonce::new(nonce.to_owned());
    let claims = match id_token.claims(&client.id_token_verifier(), &nonce) {
        // Signed with a key we do not know: the identity provider may have
        // rotated its keys since we fetched them.
        Err(
            e @ ClaimsVerificationError::SignatureVerification(
                SignatureVerificationError::NoMatchingKey,
            ),
        ) => {
            match state
                .sign_in_metadata
                .rediscover(REDISCOVERY_INTERVAL, discover(state))
                .await?
            {
                Some(fresh) => {
                    let fresh = self::client(state, fresh)?;
                    id_token.claims(&fresh.id_token_verifier(), &nonce)
                }
                None => Err(e),
            }
        }
        verified => verified,
    }
    .map_err(|e| {
        tracing::warn!(error = %e, "sign-in: ID token rejected");
        WebError::FlowRejected("The sign-in could not be verified. Please sign in again.")
    })?;
    let claim = state.settings.auth.subject_claim.as_str();
    let subject = if claim == "sub" {
        claims.subject().to_string()
    } else {
        // The signature is verified above; read the configured claim from
        // the same payload.
        claim_from_payload(&id_token.to_string(), claim).ok_or_else(|| {
            tracing::warn!(claim, "sign-in: ID token lacks the subject claim");
            WebError::FlowRejected("The sign-in did not say who you are. Please sign in again.")
        })?
    };
    let display_name = claims
        .preferred_username()
        .map(|u| u.to_string())
        .or_else(|| {
            claims
                .name()
                .and_then(|n| n.get(None))
                .map(|n| n.to_string())
        })
        .or_else(|| claims.email().map(|e| e.to_string()))
        .unwrap_or_else(|| subject.clone());
    let display_name = Some(shown_name(&display_name))
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| shown_name(&subject));
    Ok(Identity {
        issuer: crate::auth::configured_issuer(&state.settings.auth.issuer),
        subject,
        display_name,
    })
}

/// The most of a name from the ID token that is kept and shown in every
/// page's header.
const SHOWN_NAME_CHARS: usize = 64;

/// A name as it is stored and shown: what a reader cannot see dropped
/// (`domain::shown_text`), at most [`SHOWN_NAME_CHARS`] characters (then
/// an ellipsis). The identity provider lets people choose their names, of
/// any length.
fn shown_name(name: &str) -> String {
    crate::domain::shown_text::shown(name, SHOWN_NAME_CHARS)
}

fn web_client_id(state: &AppState) -> Result<&str, WebError> {
    state
        .settings
        .auth
        .web_client_id
        .as_deref()
        .filter(|id| !id.trim().is_empty())
        .ok_or(WebError::NotConfigured(
            "Signing in on the web is not set up on this server. The operator must set auth.web_client_id.",
        ))
}

/// Whether the identity provider promised (in its metadata, RFC 9207) to
/// name itself in every authorization response: then a response without
/// `iss` is not its own and must be refused (RFC 9207, section 2.4).
/// Uses the kept metadata, as the code exchange that follows does.
pub async fn names_itself_in_responses(state: &AppState) -> Result<bool, WebError> {
    let metadata = state
        .sign_in_metadata
        .get_or_discover(START_METADATA_TTL, discover(state))
        .await?;
    Ok(metadata.additional_metadata().promised())
}

/// The identity provider's metadata and keys, fetched now.
async fn discover(state: &AppState) -> Result<SignInProviderMetadata, WebError> {
    // Not configured: say so before reaching out to anyone.
    web_client_id(state)?;
    let configured = &state.settings.auth.issuer;
    let bare = crate::auth::configured_issuer(configured);
    // An issuer at a host's root is written with its slash by some
    // providers (Auth0: `https://tenant.auth0.com/`) and without by others;
    // the configuration cannot tell, and the library wants the metadata's
    // exact spelling. Try both, bare first.
    let spellings = if configured.path() == "/" && configured.query().is_none() {
        vec![bare.clone(), format!("{bare}/")]
    } else {
        vec![bare]
    };
    let http = http_client(state.http.clone());
    let mut last = None;
    for spelling in spellings {
        let issuer = IssuerUrl::new(spelling).context("auth.issuer is not a URL")?;
        match SignInProviderMetadata::discover_async(issuer, &http).await {
            Ok(metadata) => return Ok(metadata),
            Err(e @ DiscoveryError::Validation(_)) => last = Some(e.to_string()),
            Err(e) => {
                return Err(WebError::Upstream(anyhow!(
                    "identity provider discovery failed: {e}"
                )));
            }
        }
    }
    Err(WebError::Upstream(anyhow!(
        "identity provider discovery failed: {}",
        last.unwrap_or_default()
    )))
}

fn client(state: &AppState, metadata: SignInProviderMetadata) -> Result<Client, WebError> {
    let auth = &state.settings.auth;
    let client_id = web_client_id(state)?;
    // Basic is the default of RFC 6749 and OIDC; use the body only when the
    // provider says that is all it takes.
    let post_only = metadata
        .token_endpoint_auth_methods_supported()
        .is_some_and(|methods| {
            methods.contains(&CoreClientAuthMethod::ClientSecretPost)
                && !methods.contains(&CoreClientAuthMethod::ClientSecretBasic)
        });
    let secret = auth
        .web_client_secret
        .as_ref()
        .map(|s| ClientSecret::new(s.expose_secret().to_owned()));
    let redirect = RedirectUrl::new(redirect_uri(state)).context("public_url")?;
    let client =
        CoreClient::from_provider_metadata(metadata, ClientId::new(client_id.into()), secret)
            .set_redirect_uri(redirect);
    Ok(if post_only {
        client.set_auth_type(AuthType::RequestBody)
    } else {
        client
    })
}

/// A string claim of a compact JWT's payload (already verified).
fn claim_from_payload(jwt: &str, claim: &str) -> Option<String> {
    let payload = jwt.split('.').nth(1)?;
    let bytes = URL_SAFE_NO_PAD.decode(payload).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    value
        .get(claim)?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("request failed: {0}")]
    Request(#[from] reqwest::Error),
    #[error("response larger than {MAX_RESPONSE_BYTES} bytes")]
    TooLarge,
    #[error("cannot build the response: {0}")]
    Build(#[from] http::Error),
}

/// The HTTP client `openidconnect` calls: the application's reqwest client
/// (which never follows redirects), with a bounded response size.
fn http_client(
    client: reqwest::Client,
) -> impl Fn(
    openidconnect::HttpRequest,
) -> futures::future::LocalBoxFuture<'static, Result<openidconnect::HttpResponse, HttpError>> {
    move |request| Box::pin(send(client.clone(), request))
}

async fn send(
    client: reqwest::Client,
    request: openidconnect::HttpRequest,
) -> Result<openidconnect::HttpResponse, HttpError> {
    let (parts, body) = request.into_parts();
    let response = client
        .request(parts.method, parts.uri.to_string())
        .headers(parts.headers)
        .body(body)
        .send()
        .await?;
    let mut builder = http::Response::builder().status(response.status());
    for (name, value) in response.headers() {
        builder = builder.header(name, value);
    }
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(HttpError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(builder.body(body)?)
}

/// The fewest fields a discovery document may have, for tests.
#[cfg(test)]
pub(crate) fn least_discovery_document() -> serde_json::Value {
    serde_json::json!({
        "issuer": "https://idp.example",
        "authorization_endpoint": "https://idp.example/authorize",
        "jwks_uri": "https://idp.example/jwks",
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_named_claim_from_the_payload() {
        let payload = URL_SAFE_NO_PAD.encode(br#"{"sub":"x","oid":"abc","n":1}"#);
        let jwt = format!("h.{payload}.s");
        assert_eq!(claim_from_payload(&jwt, "oid").as_deref(), Some("abc"));
        assert_eq!(claim_from_payload(&jwt, "n"), None);
        assert_eq!(claim_from_payload(&jwt, "missing"), None);
        assert_eq!(claim_from_payload("garbage", "oid"), None);
    }

    /// Only a literal `true` promises `iss`; any other value (or none) is
    /// read as no promise, and never fails the discovery.
    #[test]
    fn only_true_promises_iss_and_nothing_else_fails_discovery() {
        for (value, promised) in [
            (Some(serde_json::json!(true)), true),
            (Some(serde_json::json!(false)), false),
            (Some(serde_json::json!("true")), false),
            (Some(serde_json::json!({"a": 1})), false),
            (None, false),
        ] {
            let mut document = least_discovery_document();
            if let Some(value) = &value {
                document["authorization_response_iss_parameter_supported"] = value.clone();
            }
            let metadata: SignInProviderMetadata =
                serde_json::from_value(document).expect("discovery reads it");
            assert_eq!(
                metadata.additional_metadata().promised(),
                promised,
                "{value:?}"
            );
        }
    }

    #[test]
    fn a_name_is_kept_short_and_free_of_controls() {
        assert_eq!(shown_name("  Zoë Doe "), "Zoë Doe");
        assert_eq!(shown_name("a\u{1b}[31mb\nc"), "a[31mbc");
        let long = "名".repeat(100_000);
        let shown = shown_name(&long);
        assert_eq!(shown.chars().count(), SHOWN_NAME_CHARS);
        assert!(shown.ends_with('…'));
        assert_eq!(
            shown_name(&"x".repeat(SHOWN_NAME_CHARS)).chars().count(),
            SHOWN_NAME_CHARS
        );
    }
}
