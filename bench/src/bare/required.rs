//! `--required ISSUER AUDIENCE`: the floor plus the work mcp-connect may not
//! leave out, each piece done by mcp-connect's own code — so that "ours ÷
//! this" is what the rest of mcp-connect (its bridge's other checks, its
//! tool code, its larger results) costs, and "this ÷ the floor" is the
//! price of the pieces themselves:
//!
//! - the bearer token, verified on every request (`auth::TokenVerifier`
//!   against the issuer's JWKS, with its cache of recently verified tokens):
//!   the MCP authorization spec's MUST;
//! - the access line and the request metrics (`mcp::RequestFacts`), which
//!   operators need: one JSON line per request through the same queue;
//! - the `requestState` sealed and bound to the request and opened and
//!   checked on the retry (`connect::state`): the spec's MUST that a
//!   client cannot forge or replay it;
//! - the stored upstream token sealed at rest and opened for each use (the
//!   key ring's AES-256-GCM, bound to the row as the vault binds it).

use std::sync::Arc;

use anyhow::Context;
use mcp_connect::{
    auth::{self, Principal, TokenVerifier},
    config::AuthSettings,
    crypto::{KeyRing, Purpose},
    metrics::McpMetrics,
};
use uuid::Uuid;

/// The key id the floor seals with.
const KEY_ID: &str = "bench";

pub struct Required {
    verifier: TokenVerifier,
    pub keys: KeyRing,
    pub audience: String,
    pub metrics: McpMetrics,
}

impl Required {
    pub fn new(issuer: &str, audience: &str) -> anyhow::Result<Self> {
        let settings: AuthSettings =
            serde_json::from_value(serde_json::json!({ "issuer": issuer }))
                .context("--required: the issuer is not a URL")?;
        let http = mcp_connect::providers::outbound_http_client()?;
        Ok(Self {
            verifier: TokenVerifier::new(&settings, audience.to_owned(), http),
            keys: KeyRing::from_entries([KeyRing::generate_entry(KEY_ID).as_str()])?,
            audience: audience.to_owned(),
            metrics: McpMetrics::default(),
        })
    }

    /// The caller of a request, as mcp-connect's bridge finds it; `None`
    /// answers 401 (the floor does not tell malformed from missing).
    pub async fn caller(&self, headers: &http::HeaderMap) -> Option<Arc<Principal>> {
        let token = auth::bearer_token(headers).ok()??;
        self.verifier.verify(token).await.ok()
    }

    /// Seals an upstream token for connection `id` of (`subject`, `provider`).
    pub fn seal_token(
        &self,
        id: Uuid,
        subject: &str,
        provider: &str,
        token: &[u8],
    ) -> anyhow::Result<Vec<u8>> {
        Ok(self
            .keys
            .seal(Purpose::Token, &context(id, subject, provider), token)?
            .bytes)
    }

    /// Opens what [`Self::seal_token`] sealed.
    pub fn open_token(
        &self,
        id: Uuid,
        subject: &str,
        provider: &str,
        bytes: Vec<u8>,
    ) -> anyhow::Result<Vec<u8>> {
        Ok(self.keys.open_bytes(
            Purpose::Token,
            &context(id, subject, provider),
            KEY_ID,
            &bytes,
        )?)
    }
}

/// The binding the vault gives a stored token: the connection's id, issuer,
/// subject, provider and the token's kind, each length-prefixed (built as
/// the vault builds it).
fn context(id: Uuid, subject: &str, provider: &str) -> Vec<u8> {
    let mut id_text = Uuid::encode_buffer();
    let id = &*id.hyphenated().encode_lower(&mut id_text);
    let parts = [id, super::store::ISSUER, subject, provider, "access"];
    let mut ctx = Vec::with_capacity(parts.iter().map(|p| p.len() + 4).sum());
    for part in parts {
        ctx.extend_from_slice(&(part.len() as u32).to_be_bytes());
        ctx.extend_from_slice(part.as_bytes());
    }
    ctx
}
